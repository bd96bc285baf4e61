"""capsviz (or python -m capsviz) app | doctor | train | evaluate | list | bench | export | import | site | data | translations

Here: the top-level parser (--lang), reading the command line and running its command; each
command's options and work are in a module of this package (train, models, serving, ...).

Every mistake a user can make ends with one line on stderr and exit status 2, never a traceback.
Every word it prints for a person (help, progress, results, refusals) is in the language of the
command line: `--lang`, else the environment's as gettext programs read it (LANGUAGE, LC_ALL,
LC_MESSAGES, LANG); what scripts read (JSON, CSV, file names) is the same in every language.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from pathlib import Path

from capsviz import i18n
from capsviz.cli.arguments import CLOSING, OPENING, Parser, columns, language_tag, speaking_argparse, wrap
from capsviz.cli.bench import add_bench, cmd_bench
from capsviz.cli.data import add_data, cmd_data
from capsviz.cli.doctor import add_doctor, cmd_doctor
from capsviz.cli.models import add_evaluate, add_export, add_import, add_list, cmd_evaluate, cmd_export, cmd_import, cmd_list, model_path
from capsviz.cli.serving import add_app, app_command, cmd_app
from capsviz.cli.site import SITE_MODELS, add_site, cmd_site
from capsviz.cli.train import add_train, cmd_train
from capsviz.cli.translations import add_translations, cmd_translations
from capsviz.errors import CapsvizError
from capsviz.i18n import LANGUAGES, t

# What other modules and the tests read from capsviz.cli: the entry points, the parser and the
# commands, and the helpers of the commands' own modules they check
__all__ = [
    "CLOSING",
    "COMMANDS",
    "OPENING",
    "SITE_MODELS",
    "app_command",
    "columns",
    "command_language",
    "entry",
    "main",
    "model_path",
    "named_command",
    "parser",
    "run",
    "wrap",
]


def asked_language(argv: list[str]) -> str | None:
    """--lang's value, read before the parser is made (its help is in that language): a top-level
    option, so only the arguments before the command are looked at."""
    for k, arg in enumerate(argv):
        if arg == "--lang":
            return argv[k + 1] if k + 1 < len(argv) else None
        if arg.startswith("--lang="):
            return arg.removeprefix("--lang=")
        if not arg.startswith("-"):
            return None
    return None


def named_command(argv: list[str]) -> str | None:
    """The command the arguments name, read before they are parsed (--lang's value passed over)."""
    args = iter(argv)
    for arg in args:
        if arg == "--lang":
            next(args, None)
        elif not arg.startswith("-"):
            return arg
    return None


def command_language(argv: list[str], environ=os.environ) -> str:
    """The language of this command: --lang when it names one capsviz speaks, else the environment's."""
    return i18n.normalise(asked_language(argv)) or i18n.from_environment(environ)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    with i18n.speaking(command_language(argv)), speaking_argparse():
        return run(argv)


def run(argv: list[str]) -> int:
    args = None
    try:
        p = parser()
        # `app` hands every option it does not know itself to Streamlit (--server.port 8502 ...)
        args, rest = p.parse_known_args(argv)
        if rest and args.command != "app":
            p.error(t("unrecognized arguments: %s") % " ".join(rest))
        args.streamlit_args = rest
        with interrupt_deferred():
            import torch  # noqa: F401 - every command needs it; a Ctrl-C inside its import would break it (see there)
        return COMMANDS[args.command](args)
    except CapsvizError as err:
        print(t("error: {message}", message=err), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the message or the exit short
        starting = (args.command if args is not None else named_command(argv)) == "train"  # cmd_train says more once it has started
        print(t("interrupted before training started; nothing was saved") if starting else t("interrupted"), file=sys.stderr)
        return 130


@contextlib.contextmanager
def interrupt_deferred():
    """Ctrl-C pressed inside the block takes effect as it ends: an import cut half way by
    KeyboardInterrupt leaves its module broken (torch then says "cannot load module more than once
    per process"), which would end the command with a traceback instead of its interrupted line and
    status 130. Where Ctrl-C is not Python's KeyboardInterrupt (ignored, or handled elsewhere) the
    block changes nothing."""
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield
        return
    pressed = []
    signal.signal(signal.SIGINT, lambda signum, frame: pressed.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if pressed:
        raise KeyboardInterrupt


def entry() -> None:
    """The console script and `python -m capsviz`: main's status, with Ctrl-C ignored from the
    moment main returns, so a late one cannot kill the process on its way out (which would end it
    by the signal instead of with the status main chose)."""
    code = main()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if code == 130:  # interrupted, and said so: leave now, so no library's shutdown can turn the status into death by SIGINT
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


def parser() -> Parser:
    """The command line, its help in the language of now."""
    prog = "capsviz" if Path(sys.argv[0]).stem == "capsviz" else "python -m capsviz"  # the console script or -m
    p = Parser(prog=prog, description=t("Capsule networks you can watch route."))
    p.add_argument(
        "--lang",
        type=language_tag,
        metavar="LANG",
        help=t(
            "the language of what capsviz says here: {languages} (default: LANGUAGE, LC_ALL, LC_MESSAGES or LANG, as other "
            "programs read them, else English); goes before the command",
            languages=", ".join(LANGUAGES),
        ),
    )
    sub = p.add_subparsers(dest="command", required=True)
    add_app(sub)
    add_doctor(sub)
    add_train(sub)
    add_evaluate(sub)
    add_list(sub)
    add_bench(sub)
    add_export(sub)
    add_import(sub)
    add_site(sub)
    add_data(sub)
    add_translations(sub)
    return p


COMMANDS = {
    "app": cmd_app,
    "doctor": cmd_doctor,
    "train": cmd_train,
    "evaluate": cmd_evaluate,
    "list": cmd_list,
    "bench": cmd_bench,
    "export": cmd_export,
    "import": cmd_import,
    "data": cmd_data,
    "site": cmd_site,
    "translations": cmd_translations,
}
