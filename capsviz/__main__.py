import os
import sys


def _command(argv: list[str]) -> str | None:
    """The command named on the command line (--lang's value passed over): capsviz.cli.named_command,
    which cannot be imported here."""
    args = iter(argv)
    for arg in args:
        if arg == "--lang":
            next(args, None)
        elif not arg.startswith("-"):
            return arg
    return None


try:
    from capsviz.cli import entry
except KeyboardInterrupt:  # Ctrl-C before the command line was even read: nothing started, nothing saved
    from capsviz.i18n import from_environment, speaking, t

    with speaking(from_environment(os.environ)):  # --lang is not read yet: the terminal's language
        training = _command(sys.argv[1:]) == "train"
        print(t("interrupted before training started; nothing was saved") if training else t("interrupted"), file=sys.stderr)
    sys.exit(130)

entry()
