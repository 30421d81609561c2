"""Selections -> vectorised chunk plans, with NumPy's exact semantics. Four entry points, one per way of
indexing an array, each taking the grid's dims (objects following :class:`Dim`) and the user's selection:
:func:`basic_plan` (``a[sel]``: numpy basic indexing plus at most one index array; several arrays are
ambiguous between zarr's orthogonal and numpy's pointwise meaning and raise), :func:`orthogonal_plan`
(``a.oindex[sel]``: per axis an int, a slice, a 1-D int array or a 1-D boolean mask, each axis
independently), :func:`coordinate_plan` (``a.vindex[sel]``: int arrays broadcast together, or one boolean
mask of the array's shape) and :func:`block_plan` (``a.blocks[sel]``: ints and step-1 slices in chunk units).

Errors are :class:`SelectionError` (an IndexError) naming the axis and the bound. Scalar boolean
indices (``a[True]``) are not supported. See :mod:`rectizarr.indexing.plan` for the plan layouts."""

from __future__ import annotations

import operator
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from rectizarr._util import Shape, is_int, prod
from rectizarr.errors import SelectionError
from rectizarr.indexing.axis import (
    AxisPlan,
    Dim,
    IntArray,
    axis_from_array,
    axis_from_int,
    axis_from_mask,
    axis_from_slice,
    bad_index,
    check_index,
    check_index_array,
    check_slice,
    empty_axis,
)
from rectizarr.indexing.plan import Plan, WriteMode, coordinate, orthogonal


@dataclass(frozen=True, slots=True, eq=False)
class _Item:
    pos: int  # position in the user's tuple (an Ellipsis is one position, even when it expands to none)
    axis: int  # first grid axis consumed (for np.newaxis: the next one)
    obj: Any  # None, slice, an integer, or an ndarray of integers or booleans


def _as_index(obj: object) -> object:
    """An object with ``__index__`` (not a bool, an int already or an array) as the int it stands for, as
    NumPy takes it; anything else as it is."""
    if (
        obj is None
        or is_int(obj)
        or isinstance(obj, bool | np.bool_ | np.ndarray)
        or not hasattr(type(obj), "__index__")
    ):
        return obj
    return operator.index(obj)  # type: ignore[arg-type]


def _canon(obj: object) -> object:
    """Array-likes as ndarrays (an empty list is an empty int array, like numpy; a range too); 0-d int
    arrays and objects with ``__index__`` as ints, in slices too."""
    if isinstance(obj, range):
        return np.arange(obj.start, obj.stop, obj.step, dtype=np.int64)
    if isinstance(obj, slice):
        return slice(_as_index(obj.start), _as_index(obj.stop), _as_index(obj.step))
    obj = _as_index(obj)
    if isinstance(obj, list | tuple):
        try:
            arr = np.asarray(obj)
        except ValueError as e:
            raise SelectionError(f"index {obj!r} is not a rectangular array: {e}") from None
        obj = arr.astype(np.int64) if arr.size == 0 and arr.dtype.kind == "f" else arr
    if isinstance(obj, np.ndarray) and obj.ndim == 0:
        if obj.dtype == bool:
            raise SelectionError("boolean scalar indices are not supported; use a boolean array")
        return obj.item() if obj.dtype.kind in "iu" else obj[()]
    return obj


def _width(obj: object) -> int:
    if obj is None or obj is Ellipsis:
        return 0
    if isinstance(obj, np.ndarray) and obj.dtype == bool:
        return obj.ndim
    return 1


def _expand(selection: object, ndim: int) -> tuple[list[_Item], bool]:
    """The selection as items over grid axes (Ellipsis and the implied trailing ``:`` expanded)."""
    objs = [_canon(o) for o in (selection if isinstance(selection, tuple) else (selection,))]
    ellipses = sum(o is Ellipsis for o in objs)
    if ellipses > 1:
        raise SelectionError("a selection can only have a single ellipsis ('...')")
    used = sum(_width(o) for o in objs)
    if used > ndim:
        raise SelectionError(f"too many indices: the array is {ndim}-dimensional but {used} were indexed")
    items, axis = [], 0
    for pos, o in enumerate(objs):
        if o is Ellipsis:
            items += [_Item(pos, axis + k, slice(None)) for k in range(ndim - used)]
            axis += ndim - used
        else:
            items.append(_Item(pos, axis, o))
            axis += _width(o)
    items += [_Item(len(objs), a, slice(None)) for a in range(axis, ndim)]
    return items, ellipses > 0


def _slice(dims: Sequence[Dim], it: _Item) -> tuple[int, int, int]:
    return check_slice(it.obj, it.axis, dims[it.axis].extent)


def basic_plan(dims: Sequence[Dim], selection: object) -> Plan:
    """Plan for ``a[selection]`` (numpy basic indexing plus at most one index array)."""
    items, ellipsis = _expand(selection, len(dims))
    arrays = [it for it in items if isinstance(it.obj, np.ndarray)]
    if len(arrays) > 1:
        raise SelectionError(
            "more than one index array in a[...] is ambiguous: use .oindex[...] to index each axis "
            "independently or .vindex[...] to select points"
        )
    if not arrays:
        return _orthogonal(dims, items, ellipsis, newaxis=True)
    return _one_array(dims, items, arrays[0], ellipsis)


def _one_array(dims: Sequence[Dim], items: list[_Item], arr: _Item, ellipsis: bool) -> Plan:
    """``a[sel]`` with one index array: the int indices become advanced too, as in numpy."""
    a: npt.NDArray[Any] = arr.obj
    mode: WriteMode = "mask" if a.dtype == bool and items == [arr] and not ellipsis else "fancy"
    for it in items:
        if not (it.obj is None or isinstance(it.obj, slice | np.ndarray) or is_int(it.obj)):
            raise bad_index(it.obj, it.axis)
    if a.dtype == bool:
        extents = tuple(d.extent for d in dims[arr.axis : arr.axis + a.ndim])
        if a.shape != extents:
            raise SelectionError(
                f"boolean index of shape {a.shape} does not match axes {arr.axis}..{arr.axis + a.ndim - 1} "
                f"with extents {extents}"
            )
        idx = [x.astype(np.int64) for x in np.nonzero(a)]
    else:
        idx = [check_index_array(arr.obj, arr.axis, dims[arr.axis].extent)]
    bshape: Shape = idx[0].shape if a.dtype == bool else a.shape
    ints = {it.axis: check_index(it.obj, it.axis, dims[it.axis].extent) for it in items if is_int(it.obj)}
    ranges = {it.axis: _slice(dims, it) for it in items if isinstance(it.obj, slice)}
    advanced = sorted({arr.pos} | {it.pos for it in items if is_int(it.obj)})
    adjacent = advanced[-1] - advanced[0] + 1 == len(advanced)
    layout = [it for it in items if it is arr or it.obj is None or isinstance(it.obj, slice)]
    pre = layout[: layout.index(arr)]
    if not adjacent:  # numpy puts the broadcast index dims first
        layout.remove(arr)
        layout.insert(0, arr)

    def lengths(it: _Item) -> Shape:
        return bshape if it is arr else (1,) if it.obj is None else (len(range(*ranges[it.axis])),)

    final = tuple(n for it in layout for n in lengths(it))
    same_order = adjacent or prod(tuple(n for it in pre for n in lengths(it))) == 1 or prod(bshape) <= 1
    if len(idx) == 1 and (same_order or prod(final) == 0):
        axes = []
        for j, dim in enumerate(dims):
            if j in ints:
                axes.append(axis_from_int(dim, ints[j]))
            elif j in ranges:
                axes.append(axis_from_slice(dim, *ranges[j]))
            else:
                axes.append(axis_from_array(dim, idx[0].reshape(-1)))
        return orthogonal(axes, final, mode)
    # Mixed layouts (a multi-dimensional mask beside other axes, or index dims moved to the front):
    # enumerate the points in numpy's output order as a pointwise plan.
    start = {id(it): sum(len(lengths(o)) for o in layout[:k]) for k, it in enumerate(layout)}
    nd = len(final)

    def placed(values: IntArray, at: int) -> IntArray:
        return values.reshape((1,) * at + values.shape + (1,) * (nd - at - values.ndim))

    points: list[IntArray] = []
    for j in range(len(dims)):
        if j in ints:
            points.append(np.array(ints[j], dtype=np.int64))
        elif j in ranges:
            it = next(o for o in layout if o.axis == j and isinstance(o.obj, slice))
            points.append(placed(np.arange(*ranges[j], dtype=np.int64), start[id(it)]))
        else:
            points.append(placed(idx[j - arr.axis], start[id(arr)]))
    return coordinate(dims, points, final, mode)


def orthogonal_plan(dims: Sequence[Dim], selection: object) -> Plan:
    """Plan for ``a.oindex[selection]``: every axis indexed independently; int axes are dropped."""
    return _orthogonal(dims, *_expand(selection, len(dims)), newaxis=False)


def _orthogonal(dims: Sequence[Dim], items: list[_Item], ellipsis: bool, newaxis: bool) -> Plan:
    """The plan of ``items`` indexing each axis independently (``a[...]`` without index arrays, where
    ``newaxis`` may add an axis of length 1, and ``a.oindex[...]``)."""
    axes: list[AxisPlan] = []
    final: list[int] = []
    ranges = {it.axis: _slice(dims, it) for it in items if isinstance(it.obj, slice)}
    nothing = any(not range(*r) for r in ranges.values())
    for it in items:
        if it.obj is None and newaxis:
            final.append(1)
            continue
        if it.obj is None:
            raise SelectionError(f"np.newaxis is not supported in orthogonal selections (axis {it.axis})")
        dim = dims[it.axis]
        if isinstance(it.obj, slice):  # (another slice empty: no element, and a huge axis's chunks unlisted)
            rng = ranges[it.axis]
            axes.append(empty_axis(len(range(*rng))) if nothing else axis_from_slice(dim, *rng))
        elif isinstance(it.obj, np.ndarray):
            if it.obj.dtype == bool:
                idx = axis_from_mask(it.obj, it.axis, dim.extent)
            elif it.obj.ndim != 1:
                raise SelectionError(
                    f"orthogonal index arrays must be 1-D; got shape {it.obj.shape} for axis {it.axis}"
                )
            else:
                idx = check_index_array(it.obj, it.axis, dim.extent)
            axes.append(axis_from_array(dim, idx))
        else:
            axes.append(axis_from_int(dim, check_index(it.obj, it.axis, dim.extent)))
            continue
        final.append(axes[-1].length)
    fancy = any(isinstance(it.obj, np.ndarray) for it in items)
    view = ellipsis or any(it.obj is None or isinstance(it.obj, slice) for it in items)
    return orthogonal(axes, tuple(final), "fancy" if fancy else "view" if view else "scalar")


def coordinate_plan(dims: Sequence[Dim], selection: object) -> Plan:
    """Plan for ``a.vindex[selection]``: int arrays (one per axis, broadcast together) or one full mask."""
    ndim = len(dims)
    objs = [_canon(o) for o in (selection if isinstance(selection, tuple) else (selection,))]
    extents = tuple(d.extent for d in dims)
    if ndim == 0 and not objs:  # the single element of a 0-d array, as a[()] selects it
        return orthogonal([], (), "scalar")
    if len(objs) == 1 and isinstance(objs[0], np.ndarray) and objs[0].dtype == bool:
        if objs[0].shape != extents:
            raise SelectionError(
                f"boolean mask of shape {objs[0].shape} does not match the array shape {extents}"
            )
        points = [x.astype(np.int64) for x in np.nonzero(objs[0])]
        return coordinate(dims, points, (points[0].size,), "mask")
    if len(objs) != ndim:
        raise SelectionError(
            f"coordinate selections need one integer array per axis: got {len(objs)} for {ndim} axes"
        )
    try:
        final = np.broadcast_shapes(*(o.shape if isinstance(o, np.ndarray) else () for o in objs))
    except ValueError:
        shapes = " ".join(str(o.shape if isinstance(o, np.ndarray) else ()) for o in objs)
        raise SelectionError(f"index arrays could not be broadcast together with shapes {shapes}") from None
    # no point selected: bounds are not checked, as NumPy does not check them (a[[16], []] is empty)
    bounds = extents if prod(final) else (sys.maxsize,) * ndim
    arrays: list[IntArray] = []
    for axis, o in enumerate(objs):
        if isinstance(o, np.ndarray):
            if o.dtype == bool:
                raise SelectionError(f"boolean array for axis {axis}: a coordinate mask must cover all axes")
            arrays.append(check_index_array(o, axis, bounds[axis]))
        elif is_int(o):
            arrays.append(np.array(check_index(o, axis, bounds[axis]), dtype=np.int64))
        else:
            raise bad_index(o, axis)
    return coordinate(dims, arrays, final, "fancy" if final else "scalar")


def block_plan(dims: Sequence[Dim], selection: object) -> Plan:
    """Plan for ``a.blocks[selection]``: ints (wrapping over ``nchunks``) and step-1 slices of chunks."""
    region = block_region(dims, selection)
    axes = [axis_from_slice(dim, r.start, r.stop, 1) for dim, r in zip(dims, region, strict=True)]
    return orthogonal(axes, tuple(a.length for a in axes), "view")


def block_region(dims: Sequence[Dim], selection: object) -> tuple[slice, ...]:
    """The element region (one step-1 slice per axis) that ``a.blocks[selection]`` covers; an empty block
    selection along an axis gives an empty slice there, other axes keep their extent (as numpy does)."""
    items, _ = _expand(selection, len(dims))
    region: list[slice] = []
    for it in items:
        o = it.obj
        dim = dims[it.axis] if it.axis < len(dims) else None
        if dim is None or not (isinstance(o, slice) or is_int(o)):
            raise SelectionError(
                f"block selections take integers and step-1 slices; got {o!r} for axis {it.axis}"
            )
        n = dim.nchunks
        if isinstance(o, slice):
            c0, c1, step = check_slice(o, it.axis, n)
            if step != 1:
                raise SelectionError(f"block slices must have step 1; got {o.step} for axis {it.axis}")
        else:
            c = int(o)
            if not -n <= c < n:
                raise SelectionError(f"block index {c} is out of bounds for axis {it.axis} with {n} chunks")
            c0 = c + n if c < 0 else c
            c1 = c0 + 1
        start, stop = (dim.offset(c0), dim.offset(c1 - 1) + dim.data_len(c1 - 1)) if c1 > c0 else (0, 0)
        region.append(slice(start, stop))
    return tuple(region)
