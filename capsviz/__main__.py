import sys

from capsviz.cli import main

sys.exit(main())
