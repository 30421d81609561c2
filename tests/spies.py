"""Spies on the I/O layer's fast paths, to tell which way a read took."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

import rectizarr.io.blocks as blocks


@contextmanager
def block_calls() -> Iterator[list[bool | str]]:
    """One entry per read inside the ``with`` that went batch by batch (:mod:`rectizarr.io.blocks`): True,
    or the name of what it raised (``read_block`` is asked on every read of a chunked layout; a False,
    declined, is not recorded)."""
    calls: list[bool | str] = []
    original = blocks.read_block

    def spy(*args: Any) -> bool:
        try:
            ok = original(*args)
        except Exception as e:
            calls.append(type(e).__name__)
            raise
        if ok:
            calls.append(ok)
        return ok

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(blocks, "read_block", spy)
        yield calls
