import sys

try:
    from capsviz.cli import entry
except KeyboardInterrupt:  # Ctrl-C before the command line was even read: nothing started, nothing saved
    print("interrupted", file=sys.stderr)
    sys.exit(130)

entry()
