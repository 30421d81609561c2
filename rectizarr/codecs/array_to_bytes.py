"""``array -> bytes`` codecs: ``bytes``, ``vlen-utf8``, ``vlen-bytes`` and numcodecs' (``pcodec``, ``zfpy``)."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from rectizarr.codecs.base import ArrayBytesCodec, ChunkSpec
from rectizarr.errors import MetadataError

_U32 = np.dtype("<u4")


def needs_endian(dtype: np.dtype) -> bool:
    """True when the byte order of ``dtype`` matters (some element wider than one byte)."""
    if dtype.fields is not None:
        return any(needs_endian(field[0]) for field in dtype.fields.values())
    if dtype.subdtype is not None:
        return needs_endian(dtype.subdtype[0])
    return dtype.kind not in "SVb" and dtype.itemsize > 1


class BytesCodec(ArrayBytesCodec):
    """Fixed-size elements in C order, little- or big-endian."""

    name = "bytes"
    infallible = True

    def __init__(self, endian: Literal["little", "big"] | None) -> None:
        self.endian = endian
        self._wires: dict[np.dtype, np.dtype] = {}  # dtype -> wire dtype (asked once per chunk)

    def validate(self, dtype: np.dtype, edges_per_axis: Sequence[np.ndarray]) -> None:
        if dtype.hasobject:
            raise MetadataError(
                f"the 'bytes' codec cannot code dtype {dtype} (variable-length strings/bytes need vlen-utf8 "
                "or vlen-bytes)"
            )
        if self.endian is None and needs_endian(dtype):
            raise MetadataError(f"the 'bytes' codec needs an 'endian' configuration for dtype {dtype}")

    def is_native(self, dtype: np.dtype) -> bool:
        """Whether chunks of ``dtype`` are stored as their own bytes (native byte order, no objects)."""
        return not dtype.hasobject and self._wire(dtype) == dtype

    def _wire(self, dtype: np.dtype) -> np.dtype:
        if self.endian is None:
            return dtype
        wire = self._wires.get(dtype)
        if wire is None:
            wire = self._wires[dtype] = dtype.newbyteorder("<" if self.endian == "little" else ">")
        return wire

    def encode(self, chunk: np.ndarray, spec: ChunkSpec) -> bytes:
        if chunk.size != spec.size:
            raise self.error(f"chunk of shape {chunk.shape} does not match {spec.shape}", spec.key)
        return np.asarray(chunk, dtype=self._wire(spec.dtype)).tobytes(order="C")

    def decode(self, data: bytes | memoryview, spec: ChunkSpec) -> np.ndarray:
        if len(data) != spec.nbytes:
            raise self.error(
                f"expected {spec.nbytes} bytes for shape {spec.shape} of {spec.dtype}, got {len(data)}",
                spec.key,
            )
        wire = self._wire(spec.dtype)
        out = np.frombuffer(data, dtype=wire).reshape(spec.shape)
        return out if wire == spec.dtype else out.astype(spec.dtype)

    def encoded_size(self, spec: ChunkSpec) -> int:
        return spec.nbytes


class _VlenCodec(ArrayBytesCodec):
    """``u32le`` count, then for every element in C order a ``u32le`` byte length and the bytes."""

    def validate(self, dtype: np.dtype, edges_per_axis: Sequence[np.ndarray]) -> None:
        if dtype != np.dtype(object):
            raise MetadataError(f"the {self.name!r} codec codes variable-length data, not dtype {dtype}")

    @abstractmethod
    def _to_bytes(self, item: object) -> bytes:
        """One element's encoded bytes; raises ``TypeError`` for an element of the wrong type."""

    @abstractmethod
    def _from_bytes(self, raw: bytes) -> object: ...

    def encode(self, chunk: np.ndarray, spec: ChunkSpec) -> bytes:
        try:
            items = [self._to_bytes(x) for x in chunk.reshape(-1).tolist()]
        except (TypeError, UnicodeError) as exc:
            raise self.error(f"cannot encode element: {exc}", spec.key) from exc
        n = len(items)
        lengths = np.fromiter(map(len, items), dtype=np.int64, count=n)
        if n and int(np.max(lengths)) > 0xFFFFFFFF:
            raise self.error("an element is longer than 4 GiB", spec.key)
        # Element i's length field starts after the count, i earlier length fields and its predecessors' bytes.
        starts = 4 + 4 * np.arange(n, dtype=np.int64) + np.concatenate(([0], np.cumsum(lengths)[:-1]))[:n]
        out = np.empty(4 + 4 * n + int(lengths.sum()), dtype=np.uint8)
        out[:4] = np.frombuffer(np.uint32(n).astype(_U32).tobytes(), dtype=np.uint8)
        field = starts[:, None] + np.arange(4)
        out[field] = lengths.astype(_U32).view(np.uint8).reshape(n, 4)
        payload = np.ones(out.size, dtype=bool)
        payload[:4] = False
        payload[field] = False
        out[payload] = np.frombuffer(b"".join(items), dtype=np.uint8)
        return out.tobytes()

    def decode(self, data: bytes | memoryview, spec: ChunkSpec) -> np.ndarray:
        mv = memoryview(data).cast("B")
        size = len(mv)
        if size < 4:
            raise self.error(f"{size} bytes is too short for the element count", spec.key)
        n = int.from_bytes(mv[:4], "little")
        if n != spec.size:
            raise self.error(f"holds {n} elements, expected {spec.size}", spec.key)
        if 4 + 4 * n > size:
            raise self.error(f"{n} elements cannot fit in {size} bytes", spec.key)
        items: list[object] = []
        pos = 4
        try:
            for _ in range(n):
                if pos + 4 > size:
                    raise self.error("truncated before a length field", spec.key)
                end = pos + 4 + int.from_bytes(mv[pos : pos + 4], "little")
                if end > size:
                    raise self.error(f"element ends at byte {end}, past the end ({size})", spec.key)
                items.append(self._from_bytes(bytes(mv[pos + 4 : end])))
                pos = end
        except UnicodeDecodeError as exc:
            raise self.error(f"invalid UTF-8: {exc}", spec.key) from exc
        if pos != size:
            raise self.error(f"{size - pos} trailing bytes after the last element", spec.key)
        out = np.empty(n, dtype=object)
        out[:] = items
        return out.reshape(spec.shape)


class VlenUtf8Codec(_VlenCodec):
    name = "vlen-utf8"

    def _to_bytes(self, item: object) -> bytes:
        if not isinstance(item, str):
            raise TypeError(f"expected str, got {type(item).__name__}")
        return item.encode("utf-8")

    def _from_bytes(self, raw: bytes) -> object:
        return raw.decode("utf-8")


class VlenBytesCodec(_VlenCodec):
    name = "vlen-bytes"

    def _to_bytes(self, item: object) -> bytes:
        if not isinstance(item, bytes | bytearray | memoryview):
            raise TypeError(f"expected bytes, got {type(item).__name__}")
        return bytes(item)

    def _from_bytes(self, raw: bytes) -> object:
        return raw


class VlenArrayCodec(ArrayBytesCodec):
    """zarrs' ``vlen-array`` (also ``zarrs.vlen_v2``): the variable-length layout of ``vlen-utf8`` and
    ``vlen-bytes`` (a u32 count, then a u32 length and the bytes of each element) on whichever variable-length
    type the array has: UTF-8 for ``string`` (its fill value is a ``str``), the bytes themselves otherwise."""

    name = "vlen-array"

    def __init__(self) -> None:
        self._utf8, self._bytes = VlenUtf8Codec(), VlenBytesCodec()
        self._utf8.name = self._bytes.name = self.name  # (their errors name this codec)

    def validate(self, dtype: np.dtype, edges_per_axis: Sequence[np.ndarray]) -> None:
        if dtype.kind != "O":
            raise MetadataError(f"{self.name} codes variable-length data (string, bytes), not {dtype}")

    def _pick(self, spec: ChunkSpec) -> _VlenCodec:
        fill = np.asarray(spec.fill_value, dtype=object).reshape(-1)
        return self._utf8 if fill.size and isinstance(fill[0], str) else self._bytes

    def encode(self, chunk: np.ndarray, spec: ChunkSpec) -> bytes:
        return self._pick(spec).encode(chunk, spec)

    def decode(self, data: bytes | memoryview, spec: ChunkSpec) -> np.ndarray:
        return self._pick(spec).decode(data, spec)


class NumcodecsArrayBytes(ArrayBytesCodec):
    """A numcodecs codec that turns an array into bytes (``numcodecs.pcodec``, ``numcodecs.zfpy``)."""

    def __init__(self, name: str, codec: Any) -> None:
        self.name, self.codec = name, codec

    def encode(self, chunk: np.ndarray, spec: ChunkSpec) -> bytes:
        try:
            out = self.codec.encode(np.asarray(chunk, dtype=spec.dtype, order="C"))
            return bytes(memoryview(out).cast("B"))
        except Exception as exc:
            raise self.error(f"encoding failed: {exc}", spec.key) from exc

    def decode(self, data: bytes | memoryview, spec: ChunkSpec) -> np.ndarray:
        try:
            return np.asarray(self.codec.decode(data)).reshape(spec.shape).astype(spec.dtype, copy=False)
        except Exception as exc:
            raise self.error(f"decoding failed: {exc}", spec.key) from exc
