"""``python -m rectizarr``: the same as the ``rectizarr`` command."""

from __future__ import annotations

import sys

from rectizarr.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
