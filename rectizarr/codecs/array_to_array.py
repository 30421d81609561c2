"""``array -> array`` codecs: ``transpose`` and the numcodecs filters (``numcodecs.delta`` ...)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from rectizarr._util import Shape, json_path, prod
from rectizarr.codecs.base import ArrayArrayCodec, ChunkSpec
from rectizarr.errors import MetadataError

# a numcodecs filter's output element is at most this many times its input's (int8 -> complex128)
MAX_GROWTH = 16
_DTYPE_FIELDS = ("dtype", "astype", "encode_dtype", "decode_dtype")  # numcodecs' keys naming dtypes


class TransposeCodec(ArrayArrayCodec):
    """Permute the axes: encoded axis ``i`` is decoded axis ``order[i]``."""

    name = "transpose"
    infallible = True
    axes_only = True

    def __init__(self, order: Sequence[int]) -> None:
        self.order: tuple[int, ...] = tuple(int(o) for o in order)
        if sorted(self.order) != list(range(len(self.order))):
            raise MetadataError(f"transpose order {list(self.order)} is not a permutation of 0..n-1")
        self.inverse: tuple[int, ...] = tuple(int(i) for i in np.argsort(self.order))

    def _check(self, ndim: int) -> None:
        if ndim != len(self.order):
            raise MetadataError(
                f"transpose order {list(self.order)} has {len(self.order)} axes but its input has {ndim}"
            )

    def resolve(self, spec: ChunkSpec) -> ChunkSpec:
        self._check(len(spec.shape))
        return spec.with_shape(tuple(spec.shape[o] for o in self.order))

    def map_axes(self, per_axis: Sequence[object]) -> list[object]:
        self._check(len(per_axis))
        return [per_axis[o] for o in self.order]

    def encode(self, chunk: np.ndarray, spec: ChunkSpec) -> np.ndarray:
        return np.asarray(np.transpose(chunk, self.order), order="C")

    def decode(self, chunk: np.ndarray, spec: ChunkSpec) -> np.ndarray:
        return np.transpose(chunk, self.inverse)


class NumcodecsArrayArray(ArrayArrayCodec):
    """A numcodecs filter, its flat output reshaped to the resolved shape; the output dtype is learnt by
    encoding one element of the input dtype (``astype``, ``delta`` with ``astype``, ``fixedscaleoffset`` ...
    change it), and ``packbits`` turns ``n`` booleans into ``ceil(n / 8) + 1`` bytes (a leading byte records
    the padding)."""

    def __init__(self, name: str, codec_id: str, codec: Any) -> None:
        self.name, self.codec_id, self.codec = name, codec_id, codec
        self._dtypes: dict[np.dtype, np.dtype] = {}
        self._fills: dict[tuple[np.dtype, np.dtype, bytes], np.ndarray] = {}

    @staticmethod
    def check_declared(config: Mapping[str, Any], dtype: np.dtype, path: str) -> None:
        """Refuse (``MetadataError`` at ``path.<field>``) a declared dtype of elements more than
        ``MAX_GROWTH`` times as large as those of the input ``dtype`` (at least 16 bytes allowed), before
        numcodecs codes anything: ``astype: "V2000000000"`` would make every chunk 2 GB per element."""
        limit = max(16, MAX_GROWTH * dtype.itemsize)
        for field in _DTYPE_FIELDS:
            if field not in config:
                continue
            try:
                declared = np.dtype(config[field])
            except (TypeError, ValueError) as exc:
                raise MetadataError(
                    f"{config[field]!r} is not a numpy dtype", path=json_path(path, field)
                ) from exc
            if declared.itemsize > limit:
                raise MetadataError(
                    f"{field} {config[field]!r} has {declared.itemsize}-byte elements for {dtype} input; at most "
                    f"{limit} bytes ({MAX_GROWTH} times the input's) are supported",
                    path=json_path(path, field),
                )

    def _encoded_dtype(self, spec: ChunkSpec) -> tuple[np.dtype, np.ndarray]:
        """The encoded dtype (learnt once per input dtype, by encoding one element) and fill value: the
        array's cast to that dtype (not encoded), as zarr-python's ``numcodecs.*`` codecs leave it: what an
        inner chunk of a shard after this codec that is not stored holds before it is decoded."""
        dtype = self._dtypes.get(spec.dtype)
        if dtype is None:
            one = np.asarray(spec.fill_value, dtype=spec.dtype).reshape(1)
            try:
                probe = np.asarray(self.codec.encode(one))
            except Exception as exc:
                raise MetadataError(f"codec {self.name!r} cannot code dtype {spec.dtype}: {exc}") from exc
            dtype = self._dtypes.setdefault(spec.dtype, probe.dtype.newbyteorder("="))
        value = np.asarray(spec.fill_value)
        key = (dtype, value.dtype, value.tobytes())
        fill = self._fills.get(key)
        if fill is None:
            if value.dtype.kind == "c" and dtype.kind != "c":
                value = value.real
            try:
                with np.errstate(invalid="ignore", over="ignore"):
                    fill = value.astype(dtype).reshape(())
            except (TypeError, ValueError):  # no such cast (a string fill for numbers): as numcodecs' zeros
                fill = np.zeros((), dtype)
            if value.dtype.kind != "O":  # (an object's bytes are its address)
                fill = self._fills.setdefault(key, fill)
        return dtype, fill

    def _shape(self, shape: Shape) -> Shape:
        # packbits: the bits in whole bytes, and a byte saying the padding
        return (-(-prod(shape) // 8) + 1,) if self.codec_id == "packbits" else shape

    def resolve(self, spec: ChunkSpec) -> ChunkSpec:
        dtype, fill = self._encoded_dtype(spec)
        return replace(spec, shape=self._shape(spec.shape), dtype=dtype, fill_value=fill)

    def map_axes(self, per_axis: Sequence[object]) -> list[object]:
        if self.codec_id != "packbits":
            return list(per_axis)
        # Every combination of per-axis edges gives one flat length.
        sizes = np.ones(1, dtype=np.int64)
        for edges in per_axis:
            sizes = np.unique(np.multiply.outer(sizes, np.unique(np.asarray(edges))).reshape(-1))
        return [np.unique(-(-sizes // 8) + 1)]

    def encode(self, chunk: np.ndarray, spec: ChunkSpec) -> np.ndarray:
        out = self.resolve(spec)
        try:
            encoded = np.asarray(self.codec.encode(np.asarray(chunk, order="C")))
        except Exception as exc:
            raise self.error(f"encoding failed: {exc}", spec.key) from exc
        return encoded.reshape(out.shape).astype(out.dtype, copy=False)

    def decode(self, chunk: np.ndarray, spec: ChunkSpec) -> np.ndarray:
        try:
            decoded = np.asarray(self.codec.decode(np.asarray(chunk, order="C")))
            if decoded.dtype.kind != spec.dtype.kind and decoded.dtype.itemsize == spec.dtype.itemsize:
                decoded = decoded.view(spec.dtype)  # e.g. delta over uint32 as int32: keep the bits
            return decoded.reshape(spec.shape).astype(spec.dtype, copy=False)
        except Exception as exc:
            raise self.error(f"decoding failed: {exc}", spec.key) from exc
