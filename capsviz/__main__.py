import os
import sys

try:
    from capsviz.cli import entry
except KeyboardInterrupt:  # Ctrl-C before the command line was even read: nothing started, nothing saved
    from capsviz.i18n import from_environment, speaking, t

    with speaking(from_environment(os.environ)):  # --lang is not read yet: the terminal's language
        print(t("interrupted"), file=sys.stderr)
    sys.exit(130)

entry()
