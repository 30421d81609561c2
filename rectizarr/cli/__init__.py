"""The ``rectizarr`` command line: :mod:`.main` (parser and commands), :mod:`.copy`, :mod:`.diff`, :mod:`.util`."""

from rectizarr.cli.main import main

__all__ = ["main"]
