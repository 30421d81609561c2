"""Reads, writes and document updates of an array handle: selections planned against the stored shape
(:mod:`rectizarr.indexing`), run by :mod:`rectizarr.io`, and the read-modify-write of its document."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any

import msgspec
import numpy as np

import rectizarr.io as rio
from rectizarr import nodes, tuning
from rectizarr._util import prod
from rectizarr.arrays.base import ArrayBase
from rectizarr.core import dtype_optional
from rectizarr.core.dtype import as_strings, check_unit_cast
from rectizarr.core.metadata import ArrayMeta
from rectizarr.errors import CastError, CodecError, ConflictError, SelectionError, UnsupportedError
from rectizarr.indexing import Plan, basic_plan, block_plan, block_region, coordinate_plan, orthogonal_plan
from rectizarr.pages import empty


class ArrayAccess(ArrayBase):
    """Reads, writes and document updates (see the module)."""

    def _change_meta(
        self,
        change: Callable[[ArrayMeta], ArrayMeta],
        then: Callable[[rio.Layout, ArrayMeta, ArrayMeta], None] | None = None,
    ) -> None:
        """A read-modify-write of ``zarr.json`` (:meth:`nodes.DocFormat.update`): ``change`` maps the document
        as stored now to the new one; ``then(old layout, old document, new document)`` does the chunk work
        after it is written (a shrink's clean-up, an append's data)."""
        self._check_writable()
        before: list[rio.Layout] = []

        def apply(stored: Any) -> Any:
            meta = self._take_up(stored)
            before[:] = [self._layout]
            return change(meta)

        def after(old: Any, new: Any) -> None:
            same = new.codecs == self._meta.codecs and new.chunk_grid == self._meta.chunk_grid
            self._adopt(new, self._layout.pipeline if same else None)
            if then is not None:
                then(before[0], old, new)

        with self._lock:
            nodes.format_of(self._meta).update(self._store, self._path, apply, after)

    def _update_attributes(self, change: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
        self._change_meta(lambda m: msgspec.structs.replace(m, attributes=change(dict(m.attributes))))

    def __getitem__(self, selection: Any) -> Any:
        return self._read(lambda: self._plan("basic", selection), selection)

    def __setitem__(self, selection: Any, value: Any) -> None:
        self._write(lambda: self._plan("basic", selection), value)

    def _plan(self, kind: str, selection: Any) -> Plan:
        self._revalidate()
        dims = self._layout.dims
        if kind == "basic":
            if _pointwise(selection if isinstance(selection, tuple) else (selection,), self.ndim):
                return coordinate_plan(dims, selection)
            return basic_plan(dims, selection)
        if kind == "orthogonal":
            return orthogonal_plan(dims, selection)
        if kind == "coordinate":
            return coordinate_plan(dims, selection)
        if kind == "block" and self.inner_chunk_shape is None:
            return block_plan(self.grid.dims, selection)
        if kind == "block":  # blocks are shards: an element selection (a 0-d array's one block: ``...``)
            region = block_region(self.grid.dims, selection)
            return basic_plan(dims, region if region else Ellipsis)
        raise SelectionError(f"unknown selection kind {kind!r}")

    def _planned(self, make_plan: Callable[[], Plan]) -> Plan:
        """``make_plan()``; a selection over more chunks than memory can list (2**40 per axis: numpy's
        MemoryError while planning) is a SelectionError."""
        try:
            return make_plan()
        except MemoryError as exc:
            raise SelectionError(
                f"the selection of the array {self._path or '/'!r} touches more chunks than "
                f"can be planned in memory ({exc}); select less"
            ) from exc

    def _read(self, make_plan: Callable[[], Plan], selection: Any, out: np.ndarray | None = None) -> Any:
        with self._lock:  # the plan with the layout it was made for (other threads revalidate)
            plan, layout = self._planned(make_plan), self._layout
        optional = self._meta.data_type.name == "optional"  # read as a numpy.ma.MaskedArray
        if out is not None:
            if optional:
                raise SelectionError("out= cannot take the masked values of an optional data type")
            if out.shape != plan.final_shape or out.dtype != self.dtype:
                raise SelectionError(
                    f"out has shape {out.shape} and dtype {out.dtype}; "
                    f"expected {plan.final_shape} and {self.dtype}"
                )
            internal = out.reshape(plan.shape)
            if not np.shares_memory(internal, out) and out.size:
                raise SelectionError("out must be C-contiguous")
            rio.read(layout, plan, internal)
            self._check_code_points(internal)
            return out
        nbytes = prod(plan.shape) * self.dtype.itemsize
        if nbytes > sys.maxsize:
            raise SelectionError(
                f"the selection has shape {plan.final_shape}: {nbytes} bytes, more than one "
                "numpy array can hold; select less"
            )
        result = empty(plan.shape, self.dtype)
        rio.read(layout, plan, result)
        self._check_code_points(result)
        result = result.reshape(plan.final_shape)
        scalar = result.shape == () and not _has_ellipsis(selection)
        if optional:
            return dtype_optional.to_masked(result, scalar)
        return result[()] if scalar else result

    def _cast_error(self, exc: OverflowError) -> CastError:
        return CastError(
            f"a value written to the array {self._path or '/'!r} in {self._store!r} does not fit its "
            f"data type {self.dtype}: {exc}; nothing was written"
        )

    def _prepared(self, value: Any) -> Any:
        """``value`` to write: an array-like made an array once (a dask array computed once, however often
        the write is planned; a NumPy scalar stays one: numpy's rules for scalars apply, NaN into int
        raises); the optional data type's masked values (plain ones: all present)."""
        if hasattr(value, "__array__") and not isinstance(value, np.ndarray | np.generic):
            value = np.asarray(value)
        if self._meta.data_type.name == "optional":
            try:
                value = dtype_optional.from_user(value, self._meta.data_type.numpy)
            except OverflowError as exc:
                raise self._cast_error(exc) from exc
        return value

    def _internal(self, plan: Plan, layout: rio.Layout, value: Any) -> Any:
        """``value`` as ``plan`` writes it into ``layout``'s chunks."""
        try:
            check_unit_cast(value, layout.dtype)
            internal = plan.value_to_internal(value, layout.dtype)
        except OverflowError as exc:  # (dates out of range of the unit, Python ints past the type)
            raise self._cast_error(exc) from exc
        if self._meta.data_type.name == "string":
            internal = as_strings(internal, one=plan.final_shape == ())
        return internal

    def _check_code_points(self, values: np.ndarray) -> None:
        """Fixed-length UTF-32 (NumPy ``U``) values read must be Unicode code points: a corrupt chunk's
        larger numbers make NumPy fail later, on any use, with ``SystemError``."""
        if self.dtype.kind == "U" and values.size:
            u4 = np.dtype("u4").newbyteorder(values.dtype.byteorder)
            units = np.ascontiguousarray(values).reshape(-1).view(u4)
            if (units > 0x10FFFF).any():
                raise CodecError(
                    f"the array {self._path or '/'!r} in {self._store!r} holds a value that is not a "
                    "Unicode code point (corrupt data)"
                )

    def _write(self, make_plan: Callable[[], Plan], value: Any) -> None:
        """Plan (against the stored shape: ``make_plan`` revalidates) and write. Where versions are cheap,
        the write checks, once it holds its chunks' locks, that ``zarr.json`` is still the one it planned
        with; if another handle shrank or grew the array meanwhile, it plans again (a write never puts data
        past a shrink's new end, nor clears what an append just put past the old one)."""
        self._check_writable()
        if self._unchecked:
            with self._lock:
                if self._unchecked:
                    version = self._stored_version()
                    self._take_up(nodes.read_meta(self._store, self._path))
                    self._meta_version, self._unchecked = version, False
        value = self._prepared(value)
        dates = isinstance(value, np.ndarray) and value.dtype.kind in "Mm"
        if dates and self._meta.data_type.name == "string":
            value = value.astype(np.dtypes.StringDType())  # dates as numpy writes them ('NaT', '1')
        for _ in range(tuning.current().conflict_retries):
            with self._lock:  # the plan, its layout and their version together (other threads revalidate)
                plan = self._planned(make_plan)
                layout, planned, meta = self._layout, self._meta_version, self._meta
            internal = self._internal(plan, layout, value)
            guard = None if planned is None else functools.partial(self._still_at, planned, meta)
            try:
                rio.write(layout, plan, internal, guard)
                return
            except rio.LayoutChanged:
                continue
            except MemoryError as exc:  # a chunk (or a shard's index) the metadata makes too large to hold
                raise UnsupportedError(
                    f"writing to the array {self._path or '/'!r} in {self._store!r} needs a whole chunk (or a "
                    f"shard's index) in memory, more than this machine gives: storage chunks "
                    f"{self.grid.regular_chunk_shape or 'of varying shapes'}, inner chunks "
                    f"{self.inner_chunk_shape}, {self.dtype} ({exc})"
                ) from exc
        raise ConflictError(
            f"the array {self._path or '/'!r} in {self._store!r} was resized during each of "
            f"{tuning.current().conflict_retries} attempts to write to it; try again"
        )


def _has_ellipsis(selection: Any) -> bool:
    items = selection if isinstance(selection, tuple) else (selection,)
    return any(s is Ellipsis for s in items)


def _pointwise(sel: tuple[Any, ...], ndim: int) -> bool:
    """NumPy's ``a[i, j]`` with several index arrays (or one full-shape mask) is pointwise."""
    arrays = [np.asarray(s) for s in sel if isinstance(s, np.ndarray | list)]
    if len(arrays) == 1 and arrays[0].dtype == bool and arrays[0].ndim == ndim and ndim > 1 and len(sel) == 1:
        return True
    return len(arrays) >= 2 and len(sel) == ndim and len(arrays) == ndim
