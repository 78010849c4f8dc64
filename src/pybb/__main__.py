"""``python -m pybb``: the ``pybb`` command line, for when the console script is not on PATH."""

import sys

from pybb.cli import main

sys.exit(main())
