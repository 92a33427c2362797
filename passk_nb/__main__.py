"""``python -m passk_nb`` is the ``passk`` command (same flags, same output, ``--version`` too)."""

import sys

from passk_nb.cli.main import main

sys.exit(main())
