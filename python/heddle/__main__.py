"""``python -m heddle ...``: the same command as the ``heddle`` console script."""

import sys

from heddle.cli import main

if __name__ == "__main__":
    sys.exit(main())
