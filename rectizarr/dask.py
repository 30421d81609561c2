"""``rectizarr.dask``: the dask integration under a short name (see :mod:`rectizarr.integrations.dask`).

>>> x = rectizarr.dask.from_zarr("data.zarr", "temperature")   # one block per storage chunk
>>> rectizarr.dask.to_zarr(x.rechunk({0: (31, 28, 31)}), "out.zarr", "t")   # a rectilinear grid
"""

from __future__ import annotations

from rectizarr.integrations.dask import (
    ArrayRef,
    aligned_chunks,
    from_dask,
    from_zarr,
    store_dask,
    to_dask,
    to_rectizarr,
    to_zarr,
    write_tasks,
)

__all__ = [
    "ArrayRef",
    "aligned_chunks",
    "from_dask",
    "from_zarr",
    "store_dask",
    "to_dask",
    "to_rectizarr",
    "to_zarr",
    "write_tasks",
]
