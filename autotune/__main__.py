"""``python -m autotune``: the same as the ``autotune`` command."""

import sys

from autotune.cli import main

if __name__ == "__main__":  # forkserver children re-import the main module: keep this guard
    sys.exit(main())
