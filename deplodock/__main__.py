"""`python -m deplodock ...` is the `deplodock` command."""

import sys

from deplodock.cli.main import main

sys.exit(main())
