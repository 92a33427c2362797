"""The ``passk`` command line: one module per command, each registering its own subparser."""
