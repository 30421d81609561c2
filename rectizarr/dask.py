"""``rectizarr.dask``: the dask integration under a short name (see :mod:`rectizarr.integrations.dask`).

>>> x = rectizarr.dask.from_zarr("data.zarr", "temperature")   # one block per storage chunk
>>> rectizarr.dask.to_zarr(x.rechunk({0: (31, 28, 31)}), "out.zarr", "t")   # a rectilinear grid
"""

from __future__ import annotations

from rectizarr.integrations.dask import *  # noqa: F403 - every public name, as listed there
from rectizarr.integrations.dask import __all__ as __all__
