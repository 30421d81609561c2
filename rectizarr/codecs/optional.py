"""zarrs' ``optional`` codec (zarr-extensions ``codecs/optional``): array->bytes for the ``optional`` data type.

A chunk is stored as ``mask_len`` and ``data_len`` (u64 little-endian each), then the mask encoded by the mask
chain (a ``bool`` array of the chunk's shape, True where present), then the present values in C order, as a
1-d array of the inner type, encoded by the data chain. A chunk with no present value has no data bytes
(``data_len`` 0, as zarrs writes it). In memory a chunk is the structured form of
:mod:`rectizarr.core.dtype_optional` (``value``, ``valid``)."""

from __future__ import annotations

import struct
from collections.abc import Sequence

import numpy as np

from rectizarr.codecs.base import ArrayBytesCodec, ChunkSpec
from rectizarr.codecs.pipeline import CodecPipeline
from rectizarr.core.codec_meta import OptionalMeta
from rectizarr.core.dtype_optional import is_optional_dtype
from rectizarr.errors import MetadataError

_HEADER = struct.Struct("<QQ")
_BOOL = np.dtype(np.bool_)


class OptionalCodec(ArrayBytesCodec):
    name = "optional"

    def __init__(self, mask: CodecPipeline, data: CodecPipeline) -> None:
        self.mask, self.data = mask, data

    @property
    def meta(self) -> OptionalMeta:
        """The configuration as resolved by the two chains (every parameter filled in)."""
        return OptionalMeta(mask_codecs=self.mask.metas, data_codecs=self.data.metas)

    def validate(self, dtype: np.dtype, edges_per_axis: Sequence[np.ndarray]) -> None:
        if not is_optional_dtype(dtype):
            raise MetadataError(f"the optional codec codes the optional data type only, not {dtype}")

    def _mask_spec(self, spec: ChunkSpec) -> ChunkSpec:
        return ChunkSpec(spec.shape, _BOOL, np.zeros((), dtype=_BOOL), spec.key)

    def _data_spec(self, spec: ChunkSpec, n: int) -> ChunkSpec:
        inner = spec.dtype["value"]
        return ChunkSpec((n,), inner, np.zeros((), dtype=inner), spec.key)

    def encode(self, chunk: np.ndarray, spec: ChunkSpec) -> bytes:
        valid = np.ascontiguousarray(chunk["valid"], dtype=_BOOL).reshape(spec.shape)
        mask = bytes(self.mask.encode(valid, self._mask_spec(spec)))
        values = np.ascontiguousarray(chunk["value"].reshape(spec.shape)[valid])
        data = bytes(self.data.encode(values, self._data_spec(spec, values.shape[0]))) if values.size else b""
        return _HEADER.pack(len(mask), len(data)) + mask + data

    def decode(self, data: bytes | memoryview, spec: ChunkSpec) -> np.ndarray:
        view = memoryview(data).cast("B")
        if len(view) < _HEADER.size:
            raise self.error(f"{len(view)} bytes: shorter than the 16-byte header", spec.key)
        mask_len, data_len = _HEADER.unpack_from(view)
        if _HEADER.size + mask_len + data_len != len(view):
            raise self.error(
                f"the header claims {mask_len} mask and {data_len} data bytes; the value has "
                f"{len(view) - _HEADER.size} after it",
                spec.key,
            )
        mask_end = _HEADER.size + mask_len
        valid = np.asarray(self.mask.decode(view[_HEADER.size : mask_end], self._mask_spec(spec)))
        if valid.shape != spec.shape or valid.dtype != _BOOL:
            raise self.error(f"the mask decodes to {valid.dtype}{valid.shape}", spec.key)
        n = int(np.count_nonzero(valid))
        out = np.zeros(spec.shape, dtype=spec.dtype)
        out["valid"] = valid
        if n == 0 and data_len == 0:
            return out
        values = self.data.decode(view[mask_end:], self._data_spec(spec, n))
        if values.shape != (n,):
            raise self.error(
                f"the data decodes to {values.shape[0] if values.ndim == 1 else values.shape} values; the mask "
                f"marks {n} present",
                spec.key,
            )
        out["value"][valid] = values
        return out
