"""The ``zfp`` ``array -> bytes`` codec (zarr-extensions ``codecs/zfp``, zarrs' codec): a bare zfp stream, no
header, of the chunk as a 1- to 4-dimensional zfp field (a 0-d chunk as one value).

The compression is the zfp library's, through ``zfpy`` (the ``zfp`` extra). zfpy writes header-less
streams but decodes only streams with a header, so a decode puts the header the configuration implies
(taken from a stream of zeros of the same field, 96 bits, cached per chunk shape) in front of the stored bits.
Decoding reads from a buffer zero-padded to the most bytes a valid stream of the chunk can take, and a
longer stored value is refused, so a corrupt value cannot make zfp read past its buffer.

Types: ``int32``, ``int64``, ``float32``, ``float64`` as they are; ``int8``/``int16``/``uint8``/``uint16``
promoted to ``int32`` and ``float16``/``bfloat16`` cast to ``float32``, by the spec's rules; ``uint32``/
``uint64`` as zarrs 0.23 maps them (the spec gives no rule): clamped into ``int32``/``int64`` (larger values
are not kept), negative decoded values read as 0.
``expert`` mode is read, not written: zfpy compresses in the four other modes only, but its decoder takes any
mode its header names, so a decode puts zfp's long (64-bit) mode header with the four expert parameters in
front of the stored bits; an encode raises :class:`UnsupportedError`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from rectizarr.codecs.base import ArrayBytesCodec, ChunkSpec
from rectizarr.core.dtype import data_type_from_numpy
from rectizarr.errors import MetadataError, UnsupportedError

ZFP_EXTRA = "zfp"
_HEADER_BITS = 96  # magic (32) + field and type (52) + a short mode (12)
_PROMOTED_INT = {"int8": (8, True), "int16": (16, True), "uint8": (8, False), "uint16": (16, False)}
# the spec gives no rule for these; zarrs 0.23 clamps them into the signed type of their width (values above
# its maximum are not kept), and negative decoded values to 0
_CLAMPED: dict[str, np.dtype] = {"uint32": np.dtype("int32"), "uint64": np.dtype("int64")}
_ZFP_TYPES: dict[str, np.dtype] = {  # the type zfp codes each data type as
    **{n: np.dtype(n) for n in ("int32", "int64", "float32", "float64")},
    **dict.fromkeys(_PROMOTED_INT, np.dtype("int32")),
    **dict.fromkeys(("float16", "bfloat16"), np.dtype("float32")),
    **_CLAMPED,
}
_META_BITS = 84  # magic (32) + field and type (52): the header before the mode
_LONG = 0x7FFF  # the widths zfp's long mode gives minbits, maxbits, minexp (15 bits) and maxprec (7)


def expert_mode_bits(minbits: int, maxbits: int, maxprec: int, minexp: int) -> np.ndarray:
    """zfp's 64-bit header mode for expert parameters (``zfp_stream_mode``'s long form: 12 bits of ones, then
    minbits - 1, maxbits - 1 (15 bits each), maxprec - 1 (7), minexp + 16495 (15)), as bits, least first.
    Values past a field saturate as zfp saturates them (maxbits past 32768 and maxprec past 128 limit
    nothing); a minbits past 32768 cannot be written there: UnsupportedError."""
    if minbits > _LONG + 1:
        raise UnsupportedError(f"zfp expert mode with minbits {minbits}: zfp's header holds at most 32768")
    mode = max(0, min(minexp + 16495, _LONG))
    mode = (mode << 7) + max(1, min(maxprec, 0x80)) - 1
    mode = (mode << 15) + max(1, min(maxbits, _LONG + 1)) - 1
    mode = (mode << 15) + max(1, minbits) - 1
    mode = (mode << 12) + 0xFFF
    return np.unpackbits(np.frombuffer(mode.to_bytes(8, "little"), dtype=np.uint8), bitorder="little")


def _bits(data: bytes | memoryview | np.ndarray) -> np.ndarray:
    return np.unpackbits(np.frombuffer(data, dtype=np.uint8), bitorder="little")


class ZfpCodec(ArrayBytesCodec):
    name = "zfp"

    def __init__(self, mode: str, params: dict[str, Any], path: str) -> None:
        try:
            import zfpy  # type: ignore[import-not-found]
        except ImportError:
            raise UnsupportedError(
                f"codec 'zfp' needs the zfpy package: pip install 'rectizarr[{ZFP_EXTRA}]'", path=path
            ) from None
        self.zfpy: Any = zfpy
        self.mode = mode
        arg = {"fixed_rate": "rate", "fixed_precision": "precision", "fixed_accuracy": "tolerance"}.get(mode)
        self.kwargs: dict[str, Any] = {} if arg is None else {arg: params.get(arg)}  # zfpy's, for mode
        self.expert: np.ndarray | None = None
        self.maxbits = 0
        if mode == "expert":
            if not (params["minbits"] <= params["maxbits"] and 1 <= params["maxprec"] <= 64):
                raise MetadataError(
                    f"zfp expert mode needs minbits <= maxbits and maxprec in [1, 64], got {params}",
                    path=path.removesuffix(".mode"),
                )
            self.expert = expert_mode_bits(**params)
            self.maxbits = int(params["maxbits"])
        self._headers: dict[tuple[tuple[int, ...], str], np.ndarray] = {}

    def _zfp_dtype(self, dtype: np.dtype) -> tuple[str, np.dtype]:
        name = data_type_from_numpy(dtype).name if dtype.kind != "O" else "object"
        if name not in _ZFP_TYPES:
            raise MetadataError(f"zfp does not code data type {name}")
        return name, _ZFP_TYPES[name]

    @staticmethod
    def _field(shape: Sequence[int]) -> tuple[int, ...]:
        if len(shape) > 4:
            raise MetadataError(
                f"zfp codes chunks of 1 to 4 dimensions, not {len(shape)} (a squeeze codec before "
                "it may drop axes of length 1)"
            )
        return tuple(int(s) for s in shape) or (1,)

    def validate(self, dtype: np.dtype, edges_per_axis: Sequence[np.ndarray]) -> None:
        _, zdt = self._zfp_dtype(dtype)
        if self.mode == "fixed_accuracy" and zdt.kind != "f":
            raise MetadataError(f"zfp's fixed_accuracy mode codes floating-point data only, not {dtype}")
        self._field([1] * len(edges_per_axis))

    def encoded_bound(self, spec: ChunkSpec) -> int | None:
        _, zdt = self._zfp_dtype(spec.dtype)
        # zfp's stream never exceeds the raw values by more than a few bits per 4^d block; twice plus a page
        # (in expert mode a block may take up to maxbits)
        blocks = int(np.prod([-(-n // 4) for n in self._field(spec.shape)]))
        return max(2 * spec.size * zdt.itemsize, -(-blocks * min(self.maxbits, _LONG + 1) // 8)) + 4096

    def _promote(self, chunk: np.ndarray, name: str, zdt: np.dtype) -> np.ndarray:
        if name in _PROMOTED_INT:
            n, signed = _PROMOTED_INT[name]
            wide = chunk.astype(np.int64)
            if not signed:
                wide -= 1 << (n - 1)
            return np.asarray(wide << (31 - n), dtype=np.int32)
        if name in _CLAMPED:
            return np.asarray(np.minimum(chunk, np.iinfo(zdt).max), dtype=zdt)
        return np.asarray(chunk, dtype=zdt)

    def _demote(self, values: np.ndarray, name: str, dtype: np.dtype) -> np.ndarray:
        if name in _PROMOTED_INT:
            n, signed = _PROMOTED_INT[name]
            wide: np.ndarray = values.astype(np.int64) >> (31 - n)
            if signed:
                wide = np.clip(wide, -(1 << (n - 1)), (1 << (n - 1)) - 1)
            else:
                wide = np.clip(wide + (1 << (n - 1)), 0, (1 << n) - 1)
            return wide.astype(dtype)
        return np.asarray(np.maximum(values, 0), dtype=dtype) if name in _CLAMPED else values.astype(dtype)

    def _kwargs(self, ndim: int) -> dict[str, Any]:
        """zfpy's arguments for a field of ``ndim`` dimensions: zarrs sets a fixed rate as for a 3-d field
        (``zfp_stream_set_rate(..., 3, 0)``: ``64 * rate`` bits a block), zfpy for the array's ``ndim``, so
        its rate is scaled by ``4 ** (3 - ndim)`` (a power of two: exact) to give the same bits per block."""
        if self.mode != "fixed_rate":
            return self.kwargs
        return {"rate": float(self.kwargs["rate"]) * 4.0 ** (3 - ndim)}

    def encode(self, chunk: np.ndarray, spec: ChunkSpec) -> bytes:
        if self.mode == "expert":
            raise UnsupportedError(
                "zfp's expert mode is read but not written: zfpy, the zfp binding rectizarr uses, does not "
                "compress in it (write with mode fixed_rate, fixed_precision, fixed_accuracy or reversible)",
                key=spec.key,
            )
        name, zdt = self._zfp_dtype(spec.dtype)
        field = self._field(spec.shape)
        values = np.ascontiguousarray(self._promote(np.asarray(chunk), name, zdt)).reshape(field)
        try:
            out: bytes = self.zfpy.compress_numpy(values, write_header=False, **self._kwargs(len(field)))
        except Exception as exc:
            raise self.error(f"zfp compression failed: {exc}", spec.key) from exc
        return out

    def _header(self, field: tuple[int, ...], zdt: np.dtype) -> np.ndarray:
        key = (field, zdt.str)
        header = self._headers.get(key)
        if header is None:
            # (expert: reversible's field bits)
            kwargs = self._kwargs(len(field)) if self.expert is None else {}
            header = _bits(self.zfpy.compress_numpy(np.zeros(field, dtype=zdt), **kwargs))[:_HEADER_BITS]
            if self.expert is not None:
                header = np.concatenate([header[:_META_BITS], self.expert])
            if self.expert is None and header[84:96].all():  # 12 bits of ones: a long mode, not these modes'
                raise MetadataError(f"zfp mode {self.mode} {self.kwargs} needs a long header")
            if len(self._headers) > 64:
                self._headers.clear()
            header = self._headers.setdefault(key, header)
        return header

    def decode(self, data: bytes | memoryview, spec: ChunkSpec) -> np.ndarray:
        name, zdt = self._zfp_dtype(spec.dtype)
        field = self._field(spec.shape)
        bound = self.encoded_bound(spec) or 0
        if len(data) > bound:
            raise self.error(
                f"stored value of {len(data)} bytes is more than a zfp stream of this chunk takes ({bound})",
                spec.key,
            )
        stream = np.concatenate(
            [self._header(field, zdt), _bits(data), np.zeros(8 * (bound - len(data)) + 64, np.uint8)]
        )
        padded = np.packbits(stream, bitorder="little").tobytes()
        try:
            values = np.asarray(self.zfpy.decompress_numpy(padded))
        except Exception as exc:
            raise self.error(f"zfp decompression failed: {exc}", spec.key) from exc
        if values.size != spec.size or values.dtype != zdt:
            raise self.error(f"zfp gave {values.dtype} {values.shape}, expected {zdt} {field}", spec.key)
        return self._demote(values, name, spec.dtype).reshape(spec.shape)
