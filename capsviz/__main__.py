from capsviz.cli import entry

entry()
