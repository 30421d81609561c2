"""numcodecs' ``vlen-array`` as a Zarr v3 codec (``numcodecs.vlen-array``, ``{"dtype": "<i4"}``): an object
array whose elements are 1-d NumPy arrays, stored as numcodecs' ``VLenArray`` lays it out: a u32
little-endian element count, then per element (C order) a u32 little-endian byte length and the element's
values in the declared dtype. Bit-exact with numcodecs both ways (``None`` is an empty element, a 0-d value
one element, values are cast to the declared dtype; decoded elements have the declared dtype, byte order
included). Not zarrs' ``vlen-array`` (:class:`~rectizarr.codecs.array_to_bytes.VlenArrayCodec`).

It codes object chunks (the ``bytes`` data type, whose fill value ``b""`` is an empty element: a
``bytes`` element is taken as the raw values). Decoding is bounded by the value's own length."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

import numpy as np

from rectizarr.codecs.base import ArrayBytesCodec, ChunkSpec
from rectizarr.errors import MetadataError

_U32 = struct.Struct("<I")


def vlen_array_dtype(configuration: dict[str, Any]) -> np.dtype:
    """The element dtype of a ``numcodecs.vlen-array`` configuration (``{"dtype": "<i4"}``)."""
    if set(configuration) != {"dtype"}:
        raise MetadataError(
            f'numcodecs.vlen-array takes a configuration {{"dtype": ...}}, got {configuration!r}'
        )
    try:
        dt: np.dtype = np.dtype(configuration["dtype"])
    except (TypeError, ValueError) as exc:
        raise MetadataError(
            f"numcodecs.vlen-array: invalid dtype {configuration['dtype']!r} ({exc})"
        ) from exc
    if dt.kind not in "biufc" or dt.fields is not None:  # (numcodecs' own limit: no dates, no structs)
        raise MetadataError(f"numcodecs.vlen-array: elements of {dt} are not supported (numbers only)")
    return dt


class NumcodecsVlenArrayCodec(ArrayBytesCodec):
    name = "numcodecs.vlen-array"

    def __init__(self, element: np.dtype) -> None:
        self.element = element

    def validate(self, dtype: np.dtype, edges_per_axis: Sequence[np.ndarray]) -> None:
        if dtype != np.dtype(object):
            raise MetadataError(
                f"numcodecs.vlen-array codes object arrays (the bytes data type), not {dtype}"
            )

    def _item(self, item: Any, key: str | None) -> bytes:
        if item is None:
            return b""
        if isinstance(item, bytes | bytearray | memoryview):
            raw = bytes(item)
            if len(raw) % self.element.itemsize:
                raise self.error(f"a {len(raw)}-byte element is not a whole number of {self.element}", key)
            return raw
        try:
            arr = np.ascontiguousarray(item, dtype=self.element)
        except (TypeError, ValueError, OverflowError) as exc:
            raise self.error(f"an element is not an array of {self.element}: {exc}", key) from exc
        if arr.ndim > 1:
            raise self.error(f"only 1-dimensional elements are supported, got shape {arr.shape}", key)
        return arr.tobytes()

    def encode(self, chunk: np.ndarray, spec: ChunkSpec) -> bytes:
        items = [self._item(x, spec.key) for x in np.asarray(chunk, dtype=object).reshape(-1)]
        parts = [_U32.pack(len(items))]
        for raw in items:
            parts += (_U32.pack(len(raw)), raw)
        return b"".join(parts)

    def decode(self, data: bytes | memoryview, spec: ChunkSpec) -> np.ndarray:
        view = memoryview(data).cast("B")
        if len(view) < 4:
            raise self.error(f"{len(view)} bytes: no element count", spec.key)
        (count,) = _U32.unpack_from(view)
        if count != spec.size:
            raise self.error(f"{count} elements stored, the chunk has {spec.size}", spec.key)
        out = np.empty(spec.size, dtype=object)
        pos = 4
        for i in range(count):
            if pos + 4 > len(view):
                raise self.error(f"truncated before element {i}", spec.key)
            (n,) = _U32.unpack_from(view, pos)
            pos += 4
            if pos + n > len(view) or n % self.element.itemsize:
                raise self.error(
                    f"element {i} claims {n} bytes ({len(view) - pos} left; {self.element.itemsize} per value)",
                    spec.key,
                )
            out[i] = np.frombuffer(view[pos : pos + n], dtype=self.element).copy()
            pos += n
        if pos != len(view):
            raise self.error(f"{len(view) - pos} bytes after the last element", spec.key)
        return out.reshape(spec.shape)
