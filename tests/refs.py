"""Access to the reference implementations used as cross-check oracles.

zarr-python >= 3.2 (rectilinear grids) requires Python >= 3.12. `make test` builds its environment with
a 3.12+ interpreter whenever the machine has one, and then these imports must succeed (a missing package
is a failure, not a skip). Only on a machine with no 3.12+ interpreter do the zarr-python cross-checks
skip, with that reason stated.
"""

from __future__ import annotations

import sys
from types import ModuleType

import pytest

NEEDS_312 = "zarr-python >= 3.2 needs Python >= 3.12; this test environment runs an older Python"


def zarr_python() -> ModuleType:
    if sys.version_info < (3, 12):
        pytest.skip(NEEDS_312)
    import zarr

    return zarr


def tensorstore() -> ModuleType:
    import tensorstore as ts

    return ts
