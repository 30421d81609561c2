"""What a new array is asked to be, checked once: :class:`ArraySpec` (no I/O). ``create_array``'s keywords
become one frozen spec, and the builders below take the spec, not the keywords: Zarr v3's
(:func:`rectizarr.creation.build_v3`) and v2's (:func:`rectizarr.core.v2create.v2_zarray`). Checked here
is what needs no codec; chunk grids and codec chains are resolved by the builders."""

from __future__ import annotations

import inspect
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, overload

import numpy as np

from rectizarr._util import Shape, is_int, prod
from rectizarr.core.chunk_keys import ChunkKeyEncoding, parse_chunk_key_encoding
from rectizarr.core.dtype import DataType, data_type_from_numpy
from rectizarr.core.dtype_optional import optional_fill_from_user
from rectizarr.core.metadata import check_attributes, parse_shape
from rectizarr.core.v2keys import DIMS_ATTR
from rectizarr.errors import MetadataError, UnsupportedError

__all__ = [
    "NULL_FILL",
    "RULES",
    "SPEC_KEYWORDS",
    "ZARR_FORMATS",
    "ArraySpec",
    "ByteOrders",
    "FormatRules",
    "auto_chunks",
    "check_zarr_format",
    "user_fill",
]

ByteOrders = bool | tuple["ByteOrders", ...]  # big-endian or not, per field of a structured dtype (nested)

_TARGET_CHUNK_BYTES = 1 << 20

ZARR_FORMATS: tuple[Literal[2, 3], ...] = (3, 2)
"""The Zarr formats, in the order a node is looked for where none is asked for."""


@overload
def check_zarr_format(zarr_format: Any, optional: Literal[False] = False) -> Literal[2, 3]: ...
@overload
def check_zarr_format(zarr_format: Any, optional: bool) -> Literal[2, 3] | None: ...
def check_zarr_format(zarr_format: Any, optional: bool = False) -> Literal[2, 3] | None:
    """The Zarr format that a user's ``zarr_format`` argument names, 2 or 3 (``optional``: None too, no format
    asked for); else a MetadataError. Every public function taking ``zarr_format`` checks it here."""
    if zarr_format is None and optional:
        return None
    try:
        known = not isinstance(zarr_format, bool | np.bool_) and zarr_format in ZARR_FORMATS
    except (TypeError, ValueError):  # (an array-like: no truth value)
        known = False
    if not known:
        allowed = "2, 3 or None" if optional else "2 or 3"
        raise MetadataError(f"zarr_format must be {allowed}, got {zarr_format!r}")
    return ZARR_FORMATS[ZARR_FORMATS.index(zarr_format)]


@dataclass(frozen=True, slots=True)
class FormatRules:
    """What a Zarr format lets a new array be: checked here, and carried by the node formats
    (:attr:`rectizarr.nodes.DocFormat.rules`) for what else differs by format."""

    sharding: bool  # shards=
    rectilinear: bool  # chunk grids with irregular edges
    codec_chain: bool  # codecs= and serializer= (a Zarr v3 chain); else filters= and compressors=
    order_f: bool  # order="F" (in Zarr v3: a transpose codec)
    nullable_fill: bool  # a null fill value (NULL_FILL): none; xarray's CF _FillValue is then the fill value
    bytes_fill: bool  # a bytes fill value other than b"" (Zarr v2's .zarray has no JSON form for one)
    byte_orders: bool  # big-endian data types stored as asked (">f8"; in Zarr v3: the bytes codec's endian)
    subarray_fields: bool  # structured data types with sub-array fields (the "v2:" data types)
    # the attribute that holds the dimension names (all strings; xarray requires it on every array, a 0-d
    # one too), None where the document has a field for them
    dims_attribute: str | None
    key_encoding: str  # the default chunk key encoding
    only_key_encoding: bool  # the default is the only one (an empty chunk_key_encoding= asks for it)


RULES: Mapping[int, FormatRules] = {
    3: FormatRules(
        sharding=True,
        rectilinear=True,
        codec_chain=True,
        order_f=False,
        nullable_fill=False,
        bytes_fill=True,
        byte_orders=False,
        subarray_fields=False,
        dims_attribute=None,
        key_encoding="default",
        only_key_encoding=False,
    ),
    2: FormatRules(
        sharding=False,
        rectilinear=False,
        codec_chain=False,
        order_f=True,
        nullable_fill=True,
        bytes_fill=False,
        byte_orders=True,
        subarray_fields=True,
        dims_attribute=DIMS_ATTR,
        key_encoding="v2",
        only_key_encoding=True,
    ),
}


class _NullFill:
    """The type of :data:`NULL_FILL`."""

    def __repr__(self) -> str:
        return "NULL_FILL"


NULL_FILL: Any = _NullFill()
"""``fill_value=NULL_FILL`` for a Zarr v2 array: a ``.zarray`` whose ``fill_value`` is ``null`` (no fill
value: chunks not stored read as the data type's default, and xarray sees no ``_FillValue``), what
zarr-python writes for an explicit ``fill_value=None``."""


@dataclass(frozen=True, slots=True)
class ArraySpec:
    """A new array as ``create_array`` was asked for it, checked (build it with
    :meth:`rectizarr.nodes.DocFormat.build_array`). ``chunks``, ``shards``, ``filters``, ``compressors``,
    ``serializer`` and ``codecs`` are kept as given; ``fill`` is the fill value as a 0-d array of ``dtype``
    (``null_fill``: Zarr v2's ``null``, read as that default); ``big_endian`` says, per field of a structured
    dtype, whether big-endian values were asked for (``">f8"``: Zarr v2 stores them so)."""

    shape: Shape
    dtype: DataType
    zarr_format: Literal[2, 3]
    chunks: Any
    shards: Any
    filters: Any
    compressors: Any
    serializer: Any
    codecs: tuple[Any, ...] | None
    fill: np.ndarray
    null_fill: bool
    dimension_names: tuple[str | None, ...] | None
    attributes: Mapping[str, Any]
    chunk_key_encoding: ChunkKeyEncoding
    index_location: str
    order: Literal["C", "F"]
    big_endian: ByteOrders

    @classmethod
    def from_keywords(
        cls,
        *,
        shape: Any,
        dtype: Any,
        chunks: Any = "auto",
        shards: Any = None,
        filters: Any = None,
        compressors: Any = "auto",
        serializer: Any = "auto",
        codecs: Sequence[Any] | None = None,
        fill_value: Any = None,
        dimension_names: Sequence[str | None] | None = None,
        attributes: Mapping[str, Any] | None = None,
        chunk_key_encoding: Any = None,
        index_location: str = "end",
        zarr_format: int = 3,
        order: str | None = None,
    ) -> ArraySpec:
        """The spec of ``create_array``'s keywords (their meaning is documented there); a MetadataError
        naming the keyword where one is wrong, an UnsupportedError where the format lacks it."""
        fmt = check_zarr_format(zarr_format)
        rules = RULES[fmt]
        _check_keywords(rules, shards, filters, compressors, serializer, codecs, order)
        shape_t, dt = _shape(shape), dtype if isinstance(dtype, DataType) else data_type_from_numpy(dtype)
        if not rules.subarray_fields and dt.name.startswith("v2:"):  # a structured dtype, a sub-array field
            raise UnsupportedError(
                f"no Zarr v3 data type can hold {dt.name[3:]} ({dt.numpy}); write it with zarr_format=2"
            )
        return cls(
            shape=shape_t,
            dtype=dt,
            zarr_format=fmt,
            chunks=chunks,
            shards=shards,
            filters=filters,
            compressors=compressors,
            serializer=serializer,
            codecs=None if codecs is None else tuple(codecs),
            fill=_fill(dt, fill_value, rules),
            null_fill=fill_value is NULL_FILL,
            dimension_names=_dimension_names(dimension_names, len(shape_t), rules),
            attributes=check_attributes(attributes or {}),
            chunk_key_encoding=_key_encoding(chunk_key_encoding, rules),
            index_location=index_location,
            order="F" if order == "F" else "C",
            big_endian=_asks_big_endian(dtype) if rules.byte_orders else False,
        )


SPEC_KEYWORDS = frozenset(inspect.signature(ArraySpec.from_keywords).parameters)
"""The names of ``create_array``'s keywords that describe the array (what :class:`ArraySpec` takes)."""


def whole_axes(chunks: Sequence[Any], shape: Shape) -> list[Any]:
    """``-1`` in a chunk shape as the whole axis (zarr-python's and dask's spelling)."""
    return [max(1, n) if is_int(c) and c == -1 else c for c, n in zip(chunks, shape, strict=False)]


def auto_chunks(shape: Shape, itemsize: int) -> Shape:
    """Regular chunks of about 1 MiB: halve the largest axis until the chunk is small enough."""
    chunks = [max(1, s) for s in shape]
    while prod(tuple(chunks)) * max(1, itemsize) > _TARGET_CHUNK_BYTES and max(chunks) > 1:
        i = int(np.argmax(chunks))
        chunks[i] = -(-chunks[i] // 2)
    return tuple(chunks)


def _check_keywords(
    rules: FormatRules, shards: Any, filters: Any, compressors: Any, serializer: Any, codecs: Any, order: Any
) -> None:
    """The keywords that the format has not (or not with these values), and codecs given twice."""
    if shards is not None and not rules.sharding:
        raise UnsupportedError("sharding (shards=...) exists in Zarr v3 only; use zarr_format=3")
    if not rules.codec_chain and (codecs is not None or serializer != "auto"):
        raise UnsupportedError(
            "codecs=/serializer= describe a Zarr v3 codec chain; for zarr_format=2 give "
            "filters= and compressors="
        )
    if order not in (None, "C") and not rules.order_f:
        raise MetadataError("order='F' is a Zarr v2 setting; in Zarr v3 add a transpose codec (filters=...)")
    if order not in (None, "C", "F"):
        raise MetadataError(f"order must be 'C' or 'F', got {order!r}")
    if codecs is not None and (
        filters is not None or compressors not in ("auto", None) or serializer != "auto"
    ):
        raise MetadataError("give either codecs=[...] or filters/serializer/compressors, not both")


def _shape(shape: Any) -> Shape:
    if is_int(shape):
        shape = (int(shape),)
    if not all(is_int(s) and int(s) >= 0 for s in shape):
        raise MetadataError(f"shape must be non-negative integers, got {shape!r}")
    return parse_shape([int(s) for s in shape], None)


def _fill(dt: DataType, fill_value: Any, rules: FormatRules) -> np.ndarray:
    """The fill value as a 0-d array of ``dt`` (the default one for ``None`` and Zarr v2's ``NULL_FILL``)."""
    if fill_value is NULL_FILL and not rules.nullable_fill:
        raise MetadataError(
            "a null fill value (NULL_FILL) exists in Zarr v2 only; Zarr v3 arrays always have one"
        )
    fill = dt.default_fill() if fill_value is None or fill_value is NULL_FILL else user_fill(dt, fill_value)
    if not rules.bytes_fill and dt.name == "bytes" and fill[()] != b"":
        raise UnsupportedError(
            "a Zarr v2 .zarray has no JSON form for a bytes fill value (it would be lost); "
            "leave fill_value unset (b'') or use zarr_format=3"
        )
    return fill


def user_fill(dt: DataType, value: Any) -> np.ndarray:
    """A user-given fill value as a 0-d array of the dtype, bit-exact for numpy scalars of that dtype."""
    if dt.name == "optional":
        return dt.parse_fill(optional_fill_from_user(dt.numpy, value), "fill_value")
    if isinstance(value, np.ndarray | np.generic) and np.asarray(value).dtype == dt.numpy:
        return np.array(value, dtype=dt.numpy).reshape(())
    if dt.variable_length:
        if dt.name == "string" and not isinstance(value, str):
            raise MetadataError(f"fill_value for a string array must be a str, got {value!r}")
        if dt.name != "string" and not isinstance(value, bytes | bytearray):
            raise MetadataError(f"fill_value for a bytes array must be bytes, got {value!r}")
        out = np.empty((), dtype=object)
        out[()] = str(value) if dt.name == "string" else bytes(value)  # np.str_: the plain type, as read back
        return out
    if isinstance(value, list | dict):  # the JSON form: [re, im] of a complex, {field: ...} of a struct
        return dt.parse_fill(value, "fill_value")
    try:
        arr = np.array(value, dtype=dt.numpy)
    except (TypeError, ValueError, OverflowError) as exc:
        raise MetadataError(f"fill_value {value!r} cannot be stored as {dt.name}: {exc}") from exc
    if arr.shape != ():
        raise MetadataError(f"fill_value must be a scalar, got shape {arr.shape}")
    if dt.numpy.kind in "iub" and not isinstance(value, bool | np.bool_) and arr.item() != value:
        raise MetadataError(f"fill_value {value!r} does not fit in {dt.name}")
    # Round-trip through the JSON form so what we write is exactly what we hold.
    return dt.parse_fill(dt.fill_to_json(arr), "fill_value")


def _dimension_names(given: Any, ndim: int, rules: FormatRules) -> tuple[str | None, ...] | None:
    if given is None:
        return None
    names: tuple[str | None, ...] = tuple(given)
    if rules.dims_attribute is not None and any(n is None for n in names):
        raise MetadataError("Zarr v2 dimension names (_ARRAY_DIMENSIONS) must all be strings")
    if len(names) != ndim:
        raise MetadataError(f"dimension_names has {len(names)} entries for {ndim} dimensions")
    return names


def _key_encoding(given: Any, rules: FormatRules) -> ChunkKeyEncoding:
    """The chunk key encoding asked for (zarr-python's flat ``{"name": ..., "separator": ...}`` too)."""
    name = rules.key_encoding
    if given is None or (rules.only_key_encoding and not given):
        given = {"name": name}
    if isinstance(given, Mapping) and "separator" in given and "configuration" not in given:
        given = {"name": given.get("name", name), "configuration": {"separator": given["separator"]}}
    cke = parse_chunk_key_encoding(given, "chunk_key_encoding")
    if rules.only_key_encoding and cke.name != name:
        raise UnsupportedError(f"chunk key encoding {cke.name!r} is Zarr v3 only; Zarr v2 uses 'v2'")
    return cke


def _asks_big_endian(dtype: Any) -> ByteOrders:
    """Whether ``dtype`` (a NumPy dtype or its string) names big-endian values (``">f8"``): for each field
    of a structured dtype, nested ones field by field (``[("a", "<i4"), ("b", ">f8")]`` is stored so, as
    zarr-python 2 does)."""
    if isinstance(dtype, DataType):
        return False
    try:
        return _big(np.dtype(dtype))
    except (TypeError, ValueError):
        return False


def _big(d: np.dtype[Any]) -> ByteOrders:
    if d.subdtype is not None:
        return _big(d.subdtype[0])
    if d.names:
        return tuple(_big(d[n]) for n in d.names)
    return d.byteorder == ">" or (d.byteorder == "=" and sys.byteorder == "big" and d.itemsize > 1)
