"""``python -m artune``: the command line."""

import sys

from artune.cli import main

sys.exit(main())
