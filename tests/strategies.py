"""The one home of the tests' hypothesis strategies, and ``examples()`` for example counts.

Example counts come from the hypothesis profile loaded by ``tests/conftest.py`` ("default", "ci" or "long");
a test that needs relatively more or fewer examples than the profile's base says so with ``examples(scale)``,
never with an absolute ``max_examples``.

- shapes and chunking: ``shapes``, ``rectilinear_edges``, ``axis_chunks``, ``chunked_axes``; the grid
  objects of ``rectizarr.core.grid``: ``fixed_dims``, ``varying_dims``, ``grid_dims``, ``chunk_grids``,
  ``run_edge_lists``, ``rle_specs``; chunk keys: ``chunk_key_encodings``, ``chunk_coords``
- selections, each with its numpy equivalent (``numpy_basic``, ``numpy_orthogonal``): ``slices``,
  ``basic_indexers``, ``int_arrays``, ``masks``, ``basic_selections``, ``orthogonal_selections``,
  ``coordinate_selections``, ``block_selections`` (elements: the test's own oracle); values to assign:
  ``setitem_values``, ``seeded_arrays``
- data types and fill values: ``CORE_DTYPES``, ``core_dtypes``, ``chunk_dtypes``, ``bit_patterns``,
  ``fill_values``, ``dtypes_with_fills``
- codec pipelines: ``bytes_codecs``, ``serializers``, ``transpose_codecs`` (every permutation),
  ``codec_chains``, ``codec_cases``; whole arrays: ``array_kwargs``
- JSON: ``json_values``, ``attribute_dicts``, ``dimension_names``
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numcodecs
import numpy as np
import numpy.typing as npt
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from rectizarr.codecs.base import ChunkSpec
from rectizarr.core.chunk_keys import ChunkKeyEncoding
from rectizarr.core.dtype import parse_data_type
from rectizarr.core.grid import ChunkGrid, FixedDim, VaryingDim

# ------------------------------------------------------------------------------------ example counts


def examples(scale: float = 1.0, **kwargs: Any) -> settings:
    """Settings with ``scale`` times the loaded profile's ``max_examples`` (at least one), plus ``kwargs``.

    ``@examples(3)`` for a test that needs three times the base, ``@examples(0.2)`` for a slow one."""
    return settings(max_examples=max(1, round(settings.default.max_examples * scale)), **kwargs)


# ---------------------------------------------------------------------------------- shapes and chunking


def shapes(
    *, min_dims: int = 0, max_dims: int = 3, min_side: int = 0, max_side: int = 12
) -> st.SearchStrategy[tuple[int, ...]]:
    """Array shapes: ``min_dims``..``max_dims`` sides of ``min_side``..``max_side``."""
    return st.lists(st.integers(min_side, max_side), min_size=min_dims, max_size=max_dims).map(tuple)


def _edges(draw: st.DrawFn, extent: int, max_edge: int, multiple: int, max_past: int) -> list[int]:
    edges = [multiple * draw(st.integers(1, max_edge))]
    while sum(edges) < extent:
        edges.append(multiple * draw(st.integers(1, max_edge)))
    return edges + [multiple * e for e in draw(st.lists(st.integers(1, max_edge), max_size=max_past))]


def _chunks(draw: st.DrawFn, extent: int, max_edge: int, multiple: int, max_past: int) -> int | list[int]:
    if draw(st.booleans()):
        return multiple * draw(st.integers(1, max_edge))
    return _edges(draw, extent, max_edge, multiple, max_past)


@st.composite
def rectilinear_edges(
    draw: st.DrawFn, extent: int, *, max_edge: int = 4, multiple: int = 1, max_past: int = 2
) -> list[int]:
    """At least one edge, edges until their sum reaches ``extent``, then up to ``max_past`` edges wholly past
    it; each edge ``multiple`` times 1..max_edge."""
    return _edges(draw, extent, max_edge, multiple, max_past)


@st.composite
def axis_chunks(
    draw: st.DrawFn, extent: int, *, max_edge: int = 4, multiple: int = 1, max_past: int = 2
) -> int | list[int]:
    """One axis' chunking: a regular chunk size or ``rectilinear_edges``, multiples of ``multiple``."""
    return _chunks(draw, extent, max_edge, multiple, max_past)


@st.composite
def chunked_axes(
    draw: st.DrawFn, *, min_dims: int = 0, max_dims: int = 3, max_extent: int = 11, max_edge: int = 5
) -> list[tuple[int, int | list[int]]]:
    """Per axis ``(extent, chunks)``: extents including 0, chunks as ``axis_chunks`` gives them."""
    extents = [draw(st.integers(0, max_extent)) for _ in range(draw(st.integers(min_dims, max_dims)))]
    return [(e, _chunks(draw, e, max_edge, 1, 2)) for e in extents]


#: Explicit edge lists for ``rectizarr.core.grid.VaryingDim``.
edge_lists = st.lists(st.integers(1, 12), min_size=1, max_size=25)


@st.composite
def varying_dims(draw: st.DrawFn) -> VaryingDim:
    """Explicit edges with an extent anywhere up to their sum (overhang and unaddressable edges included)."""
    edges = draw(edge_lists)
    return VaryingDim.from_edges(edges, draw(st.integers(0, sum(edges))))


fixed_dims = st.builds(FixedDim, st.integers(1, 12), st.integers(0, 150))
grid_dims = st.one_of(fixed_dims, varying_dims())


@st.composite
def chunk_grids(draw: st.DrawFn) -> ChunkGrid:
    """0-3 dims; all-fixed grids are "regular" or "rectilinear", the others "rectilinear"."""
    ds = tuple(draw(st.lists(grid_dims, max_size=3)))
    regular = all(isinstance(d, FixedDim) for d in ds) and draw(st.booleans())
    return ChunkGrid(ds, "regular" if regular else "rectilinear")


#: Edge lists with long runs of equal edges (small edges), for run-length encoding.
run_edge_lists = st.lists(st.integers(1, 4), max_size=40)
#: Run-length encoded edges as written in metadata: bare edges and ``[edge, count]`` pairs.
rle_specs = st.lists(
    st.one_of(st.integers(1, 9), st.tuples(st.integers(1, 9), st.integers(1, 5)).map(list)), max_size=12
)

chunk_key_encodings = st.builds(
    ChunkKeyEncoding, st.sampled_from(["default", "v2"]), st.sampled_from(["/", "."])
)
chunk_coords = st.lists(st.integers(0, 10**9), max_size=5).map(tuple)


# ------------------------------------------------------------------------------------------- selections

#: Slice steps: none, or either sign up to 9.
STEPS = st.none() | st.integers(1, 9) | st.integers(-9, -1)


def _bound(draw: st.DrawFn, n: int) -> int | None:
    return None if draw(st.booleans()) else draw(st.integers(-n - 3, n + 3))


def _slice(draw: st.DrawFn, n: int, steps: st.SearchStrategy[int | None]) -> slice:
    return slice(_bound(draw, n), _bound(draw, n), draw(steps))


def _basic_index(draw: st.DrawFn, n: int, steps: st.SearchStrategy[int | None]) -> int | slice:
    kind = draw(st.sampled_from(("int", "full", "slice") if n else ("full", "slice")))
    if kind == "int":
        return draw(st.integers(-n, n - 1))
    return slice(None) if kind == "full" else _slice(draw, n, steps)


@st.composite
def slices(draw: st.DrawFn, n: int, steps: st.SearchStrategy[int | None] = STEPS) -> slice:
    """Slices of an axis of extent ``n``; bounds may be negative or out of range."""
    return _slice(draw, n, steps)


@st.composite
def basic_indexers(draw: st.DrawFn, n: int, steps: st.SearchStrategy[int | None] = STEPS) -> int | slice:
    """One axis of a basic selection: an int (if the axis is not empty), ``:`` or a slice."""
    return _basic_index(draw, n, steps)


def int_arrays(n: int, shape: tuple[int, ...]) -> st.SearchStrategy[npt.NDArray[np.int64]]:
    """Index arrays (negative indices included) into an axis of extent ``n`` (empty when ``n`` is 0)."""
    if n == 0 and 0 not in shape:
        shape = (0, *shape[1:]) if shape else (0,)
    return hnp.arrays(np.int64, shape, elements=st.integers(-n, max(n - 1, -n)))


def masks(shape: tuple[int, ...]) -> st.SearchStrategy[npt.NDArray[np.bool_]]:
    return hnp.arrays(np.bool_, shape)


def _with_ellipsis(draw: st.DrawFn, items: list[Any]) -> list[Any]:
    """Maybe replace a run of items by ``...``, or drop trailing items (implied ``:``)."""
    choice = draw(st.sampled_from(["keep", "ellipsis", "truncate"]))
    if choice == "ellipsis":
        p = draw(st.integers(0, len(items)))
        q = draw(st.integers(p, len(items)))
        return [*items[:p], Ellipsis, *items[q:]]
    if choice == "truncate":
        return items[: draw(st.integers(0, len(items)))]
    return items


@st.composite
def basic_selections(
    draw: st.DrawFn,
    shape: Sequence[int],
    *,
    steps: st.SearchStrategy[int | None] = STEPS,
    advanced: bool = True,
    ellipsis: bool = True,
    newaxis: bool = True,
) -> tuple[Any, ...]:
    """numpy's ``a[sel]``: per axis an int or a slice; with ``advanced`` maybe one int array (1-2 dims) or
    a mask over one or more axes; with ``ellipsis`` maybe ``...`` or fewer items than axes; with ``newaxis``
    up to two ``None``. Without the three: exactly one int or slice per axis."""
    extents = list(shape)
    array_at = draw(st.none() | st.integers(0, max(len(extents) - 1, 0))) if extents and advanced else None
    items: list[Any] = []
    axis = 0
    while axis < len(extents):
        e = extents[axis]
        if axis == array_at:
            kind = draw(st.sampled_from(["ints", "mask", "masks"]))
            if kind == "ints":
                ishape = draw(hnp.array_shapes(min_dims=1, max_dims=2, min_side=0, max_side=4))
                items.append(draw(int_arrays(e, ishape)))
                axis += 1
            else:
                k = 1 if kind == "mask" else draw(st.integers(1, len(extents) - axis))
                items.append(draw(masks(tuple(extents[axis : axis + k]))))
                axis += k
            continue
        items.append(_basic_index(draw, e, steps))
        axis += 1
    if ellipsis:
        items = _with_ellipsis(draw, items)
    if newaxis:
        for _ in range(draw(st.integers(0, 2))):
            items.insert(draw(st.integers(0, len(items))), None)
    return tuple(items)


@st.composite
def orthogonal_selections(
    draw: st.DrawFn, shape: Sequence[int], *, ellipsis: bool = True, max_array: int = 6
) -> tuple[Any, ...]:
    """``oindex``: per axis an int, a slice, an int array (0..max_array long, duplicates included) or a mask."""
    items: list[Any] = []
    for e in shape:
        kind = draw(st.sampled_from(["index", "array", "mask"]))
        if kind == "index":
            items.append(_basic_index(draw, e, STEPS))
        elif kind == "array":
            items.append(draw(int_arrays(e, (draw(st.integers(0, max_array)),))))
        else:
            items.append(draw(masks((e,))))
    return tuple(_with_ellipsis(draw, items) if ellipsis else items)


@st.composite
def coordinate_selections(
    draw: st.DrawFn, shape: Sequence[int], *, full_masks: bool = True, max_side: int = 3
) -> Any:
    """``vindex``: one int array per axis, broadcast together (fewer leading dims, sides of 1, scalars), of
    0-3 dims with sides up to ``max_side``; or (``full_masks``) one mask of the whole shape."""
    extents = tuple(shape)
    if extents and full_masks and draw(st.booleans()):
        return draw(masks(extents))
    bshape = draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=max_side))
    if 0 in extents:
        bshape = (0, *bshape[1:]) if bshape else (0,)
    arrays: list[Any] = []
    for e in extents:
        own = bshape
        if e and draw(st.booleans()):  # a broadcastable shape: fewer leading dims, some sides 1
            own = tuple(1 if draw(st.booleans()) else n for n in bshape[draw(st.integers(0, len(bshape))) :])
        arrays.append(draw(int_arrays(e, own)) if own else np.int64(draw(st.integers(-e, e - 1))))
    return tuple(arrays)


@st.composite
def block_selections(draw: st.DrawFn, grid_shape: Sequence[int]) -> tuple[Any, ...]:
    """``blocks``: per axis a chunk index or a slice of chunks (step None or 1), given chunks per axis."""
    items: list[Any] = []
    for n in grid_shape:
        bound = st.none() | st.integers(-n - 2, n + 2)
        if n and draw(st.booleans()):
            items.append(draw(st.integers(-n, n - 1)))
        else:
            items.append(slice(draw(bound), draw(bound), draw(st.sampled_from([None, 1]))))
    return tuple(_with_ellipsis(draw, items))


def expand(sel: tuple[Any, ...], ndim: int) -> list[Any]:
    """One item per axis: ``...`` and the implied trailing ``:`` written out."""
    at = [i for i, s in enumerate(sel) if s is Ellipsis]
    if at:
        sel = (*sel[: at[0]], *[slice(None)] * (ndim - len(sel) + 1), *sel[at[0] + 1 :])
    return [*sel, *[slice(None)] * (ndim - len(sel))]


Select = Callable[[Any], Any]
Assign = Callable[[Any, Any], None]


def numpy_basic(sel: Any) -> tuple[Select, Assign]:
    """numpy's equivalent of a basic (or coordinate, or block-as-elements) selection: ``a[sel]``."""

    def assign(a: Any, v: Any) -> None:
        a[sel] = v

    return (lambda a: a[sel]), assign


def _ix(
    sel: Sequence[Any], shape: Sequence[int]
) -> tuple[tuple[npt.NDArray[np.int64], ...], tuple[int, ...]]:
    """numpy's equivalent of an orthogonal selection: np.ix_ arrays and the result shape."""
    if any(s is Ellipsis for s in sel):
        sel = expand(tuple(sel), len(shape))
    sel = list(sel) + [slice(None)] * (len(shape) - len(sel))
    arrays, final = [], []
    for s, extent in zip(sel, shape, strict=True):
        if isinstance(s, slice):
            a = np.arange(*s.indices(extent))
        elif np.ndim(s) == 0:
            a = np.array([s % extent])
        else:
            s = np.asarray(s)
            a = np.flatnonzero(s) if s.dtype == bool else s.astype(np.int64)
        arrays.append(a)
        if isinstance(s, slice) or np.ndim(s):
            final.append(a.size)
    return np.ix_(*arrays), tuple(final)


def numpy_orthogonal(sel: Sequence[Any], shape: Sequence[int]) -> tuple[Select, Assign]:
    """numpy's equivalent of an orthogonal selection over the first ``len(shape)`` axes (``...`` allowed):
    ``(select, assign)``; assign broadcasts the value like ``oindex[sel] = value``."""
    ix, final = _ix(sel, shape)
    ndim = len(shape)

    def assign(a: Any, v: Any) -> None:
        a[ix] = np.broadcast_to(v, final).reshape(a[ix].shape)

    return (lambda a: a[ix].reshape(final + a.shape[ndim:])), assign


@st.composite
def setitem_values(draw: st.DrawFn, shape: tuple[int, ...], leading_ones: bool = True) -> Any:
    """int64 values to assign to a selection of ``shape``: the full shape, a scalar, a broadcastable shape
    (fewer leading dims, sides of 1) or (``leading_ones``) an extra leading axis of 1."""
    kinds = ["full", "scalar", "broadcast", "leading"] if leading_ones else ["full", "scalar", "broadcast"]
    kind = draw(st.sampled_from(kinds))
    if kind == "scalar":
        return draw(st.integers(-(2**40), 2**40))
    if kind == "broadcast":
        shape = tuple(1 if draw(st.booleans()) else n for n in shape[draw(st.integers(0, len(shape))) :])
    elif kind == "leading":
        shape = (1, *shape)
    return draw(hnp.arrays(np.int64, shape, elements=st.integers(-(2**40), 2**40)))


def _seeded(shape: tuple[int, ...], dtype: Any, seed: int) -> np.ndarray:
    n = int(np.prod(shape))
    rng = np.random.default_rng(seed)
    kind = np.dtype(dtype).kind
    if kind == "b":
        return rng.integers(0, 2, n).astype(bool).reshape(shape)
    if kind == "c":
        return (rng.integers(-5, 5, n) + 1j * rng.integers(-5, 5, n)).astype(dtype).reshape(shape)
    return rng.integers(0, 100, n).astype(dtype).reshape(shape)


def seeded_arrays(shape: tuple[int, ...], dtype: Any) -> st.SearchStrategy[np.ndarray]:
    """Arrays of small values (0..99; complex parts -5..4; bools) from a drawn seed: cheap at any size."""
    return st.integers(0, 2**32 - 1).map(lambda seed: _seeded(shape, dtype, seed))


# ---------------------------------------------------------------------------- data types and fill values

#: The zarr v3 core data types (their names are numpy's).
CORE_DTYPES = (
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64", "complex64", "complex128",
)  # fmt: skip
core_dtypes = st.sampled_from(CORE_DTYPES)
#: numpy dtypes of chunks that codecs see: the core types, fixed-size bytes and str, and objects (strings).
chunk_dtypes = st.sampled_from([*CORE_DTYPES, "S3", "<U2", object])


def bit_patterns(dtype: np.dtype) -> st.SearchStrategy[np.ndarray]:
    """0-d arrays of ``dtype`` holding any bit pattern (NaN payloads, -0.0, NaT, infinities...)."""
    return st.binary(min_size=dtype.itemsize, max_size=dtype.itemsize).map(
        lambda raw: np.frombuffer(raw, dtype=dtype).reshape(()).copy()
    )


def fill_values(data_type: Any) -> st.SearchStrategy[Any]:
    """Canonical JSON fill values of a zarr data type (its metadata JSON): any bit pattern of fixed-size
    types, any bool, short strings and byte strings."""
    t = parse_data_type(data_type)
    if t.numpy.kind == "b":
        return st.booleans()
    if t.numpy.kind == "U":
        chars = st.text(alphabet=st.characters(codec="utf-8"), max_size=t.numpy.itemsize // 4)
        return chars.map(lambda v: t.fill_to_json(np.array(v, dtype=t.numpy)))
    if t.variable_length:
        if t.to_json() == "string":
            return st.text(max_size=5)
        return st.binary(max_size=8).map(lambda v: t.fill_to_json(t.parse_fill(list(v))))
    return bit_patterns(t.numpy).map(t.fill_to_json)


@st.composite
def dtypes_with_fills(draw: st.DrawFn, names: Sequence[Any] = CORE_DTYPES) -> tuple[Any, Any]:
    """``(data type JSON, one of its fill values)``."""
    name = draw(st.sampled_from(list(names)))
    return name, draw(fill_values(name))


# ------------------------------------------------------------------------------------------ codecs

BLOSC_CNAMES = numcodecs.blosc.list_compressors()


def bytes_codecs() -> st.SearchStrategy[dict[str, Any]]:
    """One bytes->bytes codec: gzip, zstd (either checksum), blosc (every compressor and shuffle), crc32c."""
    return st.one_of(
        st.builds(lambda lvl: {"name": "gzip", "configuration": {"level": lvl}}, st.integers(0, 9)),
        st.builds(
            lambda lvl, ck: {"name": "zstd", "configuration": {"level": lvl, "checksum": ck}},
            st.integers(-5, 5),
            st.booleans(),
        ),
        st.builds(
            lambda cname, clevel, shuffle, typesize: {
                "name": "blosc",
                "configuration": {
                    "cname": cname,
                    "clevel": clevel,
                    "shuffle": shuffle,
                    "typesize": typesize,
                    "blocksize": 0,
                },
            },
            st.sampled_from(BLOSC_CNAMES),
            st.integers(0, 9),
            st.sampled_from(["noshuffle", "shuffle", "bitshuffle"]),
            st.integers(1, 8),
        ),
        st.just({"name": "crc32c"}),
    )


def serializers(dtype: np.dtype) -> st.SearchStrategy[dict[str, Any]]:
    """The array->bytes codec for ``dtype``: vlen-utf8 for objects, else bytes (either endian; none when
    the endian does not matter)."""
    if dtype.hasobject:
        return st.just({"name": "vlen-utf8"})
    endians: list[str | None] = ["little", "big"]
    if dtype.itemsize == 1 or dtype.kind == "S":
        endians.append(None)
    return st.sampled_from(endians).map(
        lambda endian: (
            {"name": "bytes"} if endian is None else {"name": "bytes", "configuration": {"endian": endian}}
        )
    )


def transpose_codecs(ndim: int) -> st.SearchStrategy[dict[str, Any]]:
    """A transpose codec of any of the ``ndim!`` orders (the identity included)."""
    return st.permutations(range(ndim)).map(
        lambda order: {"name": "transpose", "configuration": {"order": list(order)}}
    )


@st.composite
def codec_chains(
    draw: st.DrawFn, dtype: np.dtype, shape: tuple[int, ...], depth: int = 0
) -> list[dict[str, Any]]:
    """A valid chain for chunks of ``shape``: [transpose], a serializer or sharding (nested at most twice,
    inner chunks dividing the chunk, index codecs with or without crc32c, index at start or end), then 0-3
    bytes->bytes codecs."""
    codecs: list[dict[str, Any]] = []
    if draw(st.booleans()):
        transpose = draw(transpose_codecs(len(shape)))
        codecs.append(transpose)
        shape = tuple(shape[o] for o in transpose["configuration"]["order"])
    if depth < 2 and draw(st.integers(0, 2)) == 0:
        inner = tuple(draw(st.sampled_from([d for d in range(1, s + 1) if s % d == 0])) for s in shape)
        index_codecs: list[dict[str, Any]] = [draw(serializers(np.dtype(np.uint64)))]
        if draw(st.booleans()):
            index_codecs.append({"name": "crc32c"})
        codecs.append(
            {
                "name": "sharding_indexed",
                "configuration": {
                    "chunk_shape": list(inner),
                    "codecs": draw(codec_chains(dtype, inner, depth + 1)),
                    "index_codecs": index_codecs,
                    "index_location": draw(st.sampled_from(["start", "end"])),
                },
            }
        )
    else:
        codecs.append(draw(serializers(dtype)))
    codecs.extend(draw(st.lists(bytes_codecs(), max_size=3)))
    return codecs


@st.composite
def codec_cases(draw: st.DrawFn) -> tuple[list[dict[str, Any]], np.ndarray, ChunkSpec]:
    """``(codecs, chunk, spec)``: a chain from ``codec_chains`` and a chunk of any bit patterns of a
    ``chunk_dtypes`` dtype (0-3 dims, sides 1-6), often partly equal to the fill value."""
    dtype = np.dtype(draw(chunk_dtypes))
    shape = draw(shapes(max_dims=3, min_side=1, max_side=6))
    n = int(np.prod(shape))
    if dtype.hasobject:
        data = np.empty(n, dtype=object)
        data[:] = draw(st.lists(st.text(max_size=4), min_size=n, max_size=n))
        fill = np.array("", dtype=object)
    else:
        raw = draw(st.binary(min_size=n * dtype.itemsize, max_size=n * dtype.itemsize))
        if dtype.kind == "b":
            data = (np.frombuffer(raw, dtype=np.uint8) & 1).astype(bool)
        elif dtype.kind == "U":
            data = np.frombuffer(raw, dtype=np.uint32) % 0x10000
            data = np.where((data >= 0xD800) & (data < 0xE000), 0x41, data).astype(np.uint32).view(dtype)
        else:
            data = np.frombuffer(raw, dtype=dtype)
        # Often make some of the data equal to the fill, so sharding leaves inner chunks out.
        fill = data[0].copy() if n and draw(st.booleans()) else np.zeros((), dtype)
        if n and draw(st.booleans()):
            data = np.where(np.arange(n) % 2 == 0, fill, data)
    data = data.reshape(shape)
    return (
        draw(codec_chains(dtype, shape)),
        data,
        ChunkSpec(shape, dtype, np.asarray(fill, dtype=dtype), "c/0"),
    )


@st.composite
def array_kwargs(draw: st.DrawFn) -> dict[str, Any]:
    """``rectizarr.create_array`` keywords: 1-3 dims of 0-12, a core dtype, 0-2 bytes->bytes codecs, maybe a
    transpose, fill None, 0, 1 or any bit pattern of the dtype (NaN payloads, -0.0, ...), write_empty_chunks
    either way; regular or rectilinear chunks per axis, or inner chunks of 1-3 in shards (regular or
    rectilinear, multiples of the inner chunk) indexed at either end."""
    shape = draw(shapes(min_dims=1, max_dims=3, max_side=12))
    ndim = len(shape)
    dtype = draw(core_dtypes)
    fill = draw(st.none() | st.sampled_from([0, 1]) | bit_patterns(np.dtype(dtype)).map(lambda a: a[()]))
    kwargs: dict[str, Any] = {
        "shape": shape,
        "dtype": dtype,
        "compressors": draw(st.lists(bytes_codecs(), max_size=2)),
        "filters": [draw(transpose_codecs(ndim))] if draw(st.booleans()) else [],
        "fill_value": fill if dtype != "bool" or fill is None else bool(fill),
        "write_empty_chunks": draw(st.booleans()),
    }
    if draw(st.booleans()):  # sharded
        inner = tuple(draw(st.integers(1, 3)) for _ in range(ndim))
        kwargs["chunks"] = inner
        kwargs["shards"] = [_chunks(draw, s, 4, m, 2) for s, m in zip(shape, inner, strict=True)]
        kwargs["index_location"] = draw(st.sampled_from(["start", "end"]))
    else:
        kwargs["chunks"] = [_chunks(draw, s, 4, 1, 2) for s in shape]
    return kwargs


# ------------------------------------------------------------------------------------------------ JSON

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**64 - 1),
    st.text(max_size=5),
    st.floats(allow_nan=False, allow_infinity=False),
)
json_values = st.recursive(
    json_scalars,
    lambda c: st.one_of(st.lists(c, max_size=3), st.dictionaries(st.text(max_size=4), c, max_size=3)),
    max_leaves=10,
)
attribute_dicts = st.dictionaries(st.text(max_size=6), json_values, max_size=4)


def dimension_names(ndim: int) -> st.SearchStrategy[list[str | None] | None]:
    """None, or per axis a name (maybe empty) or None."""
    return st.none() | st.lists(st.none() | st.text(max_size=3), min_size=ndim, max_size=ndim)


# ---------------------------------------------------------------------------- virtual concatenation


@st.composite
def concat_cases(draw: st.DrawFn) -> dict[str, Any]:
    """Sources to join (``rectizarr.virtual``): ``ndim`` 1..3, an ``axis``, 1..4 source ``lengths`` along it
    (0 now and then, all of them at times) over the same ``other`` extents, and one layout for all: ``kwargs`` of
    ``create_array`` (regular chunks, a raw/zstd/gzip chain or sharding, Zarr v3 or v2) plus a ``dtype``;
    ``partial``: per source, whether only its first half is written (the rest: missing chunks)."""
    ndim = draw(st.integers(1, 3))
    axis = draw(st.integers(0, ndim - 1))
    n = draw(st.integers(1, 4))
    lengths = draw(st.lists(st.integers(0, 15), min_size=n, max_size=n))
    other = [draw(st.integers(1, 6)) for _ in range(ndim)]
    chunks = [draw(st.integers(1, 8)) for _ in range(ndim)]
    layout = draw(st.sampled_from(["raw", "zstd", "gzip", "sharded", "v2"]))
    kwargs: dict[str, Any] = {"chunks": tuple(chunks), "fill_value": draw(st.sampled_from([0, 7]))}
    if layout == "raw":
        kwargs["compressors"] = None
    elif layout == "gzip":
        kwargs["compressors"] = {"name": "gzip", "configuration": {"level": 1}}
    elif layout == "sharded":
        kwargs["shards"] = tuple(c * draw(st.integers(1, 3)) for c in chunks)
        kwargs["index_location"] = draw(st.sampled_from(["start", "end"]))
    if layout == "v2":
        kwargs["zarr_format"] = 2
        kwargs["chunk_key_encoding"] = {"name": "v2", "separator": draw(st.sampled_from([".", "/"]))}
    else:  # Zarr v3 arrays may name their chunks in any of the encodings
        kwargs["chunk_key_encoding"] = draw(
            st.sampled_from([None, {"name": "default", "separator": "."}, {"name": "v2", "separator": "."}])
        )
    dtype = draw(st.sampled_from([">i4", "<f8", "u1"] if layout == "v2" else ["int16", "float32", "uint8"]))
    return {
        "ndim": ndim,
        "axis": axis,
        "lengths": lengths,
        "other": other,
        "kwargs": kwargs,
        "dtype": dtype,
        "partial": draw(st.lists(st.booleans(), min_size=n, max_size=n)),
        "seed": draw(st.integers(0, 2**16)),
    }
