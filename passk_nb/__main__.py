"""``python -m passk_nb`` is the ``passk`` command."""

import sys

from passk_nb.cli.main import main

sys.exit(main())
