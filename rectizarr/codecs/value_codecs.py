"""Value-transforming ``array -> array`` codecs of zarr-extensions: ``scale_offset`` and ``cast_value``.

``scale_offset`` computes ``(in - offset) * scale`` in the input's own data type (floats with numpy's
IEEE arithmetic, so bit for bit what zarr-python computes; integers exactly, an error where a result does
not fit or a decoded quotient is not whole). ``cast_value`` converts values to another numeric data type
with the spec's rounding and out-of-range modes; the conversion is the ``cast-value-rs`` package's, the
backend zarr-python uses (the ``cast-value`` extra), so both write the same bits."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from rectizarr._util import json_path
from rectizarr.codecs.base import ArrayArrayCodec, ChunkSpec
from rectizarr.core import codec_meta as cm
from rectizarr.core.dtype import INTEGER_NAMES, DataType, data_type_from_numpy, parse_data_type
from rectizarr.core.dtype_ext import ML_INTS
from rectizarr.core.fill import FLOAT_SPECS
from rectizarr.errors import CodecError, MetadataError, UnsupportedError

CAST_VALUE_EXTRA = "cast-value"
#: data types the cast_value specification allows on either side (float8_e4m3fn is not registered)
_CAST_SPEC_TYPES = INTEGER_NAMES | set(ML_INTS) | (set(FLOAT_SPECS) - {"float8_e4m3fn"})
_CAST_BACKEND_TYPES = INTEGER_NAMES | {"float16", "float32", "float64"}  # those the backend converts


class ScaleOffsetCodec(ArrayArrayCodec):
    """``scale_offset`` for one input dtype (integer or floating point); shape and dtype are kept."""

    name = "scale_offset"

    def __init__(self, meta: cm.ScaleOffsetMeta, dtype: np.dtype, path: str) -> None:
        config = json_path(path, "configuration")
        if dtype.kind not in "iuf":
            raise MetadataError(
                f"scale_offset codes integer and floating-point data only, not {dtype}", path=path
            )
        dt = data_type_from_numpy(dtype)
        self.dtype = dtype
        self.offset = dt.parse_fill(meta.offset, json_path(config, "offset"))[()]
        self.scale = dt.parse_fill(meta.scale, json_path(config, "scale"))[()]
        if self.scale == 0:
            raise MetadataError(
                "scale must not be zero (decoding divides by it)", path=json_path(config, "scale")
            )
        self._fills: dict[bytes, np.ndarray] = {}

    def _check_dtype(self, spec: ChunkSpec) -> None:
        if spec.dtype != self.dtype:
            raise MetadataError(f"scale_offset was built for {self.dtype}, not {spec.dtype}")

    def resolve(self, spec: ChunkSpec) -> ChunkSpec:
        """The same shape and dtype; the fill value encoded (an integer one that does not fit wraps around:
        it stands only for chunks never written, and is decoded by nobody)."""
        self._check_dtype(spec)
        value = np.asarray(spec.fill_value, dtype=self.dtype)
        fill = self._fills.get(value.tobytes())
        if fill is None:
            with np.errstate(all="ignore"):
                fill = np.asarray((value - self.offset) * self.scale, dtype=self.dtype).reshape(())
            fill = self._fills.setdefault(value.tobytes(), fill)
        return replace(spec, fill_value=fill)

    def _check_range(self, chunk: np.ndarray, key: str | None, f: Callable[[int], int], what: str) -> None:
        """``f`` (linear in x: its extremes are at the smallest and largest x) maps every integer of ``chunk``
        into the dtype; where it does, numpy's arithmetic modulo 2**bits gives every exact result."""
        info = np.iinfo(self.dtype)
        for x in (int(chunk.min()), int(chunk.max())) if chunk.size else ():
            if not info.min <= f(x) <= info.max:
                raise self.error(
                    f"{what} for x = {x} gives a value outside {self.dtype} [{info.min}, {info.max}]", key
                )

    def encode(self, chunk: np.ndarray, spec: ChunkSpec) -> np.ndarray:
        self._check_dtype(spec)
        chunk = np.asarray(chunk, dtype=self.dtype)
        if self.dtype.kind == "f":
            return np.asarray((chunk - self.offset) * self.scale)
        off, scale = int(self.offset), int(self.scale)
        self._check_range(chunk, spec.key, lambda x: (x - off) * scale, f"(x - {off}) * {scale}")
        with np.errstate(over="ignore"):
            return np.asarray((chunk - self.offset) * self.scale, dtype=self.dtype)

    def decode(self, chunk: np.ndarray, spec: ChunkSpec) -> np.ndarray:
        self._check_dtype(spec)
        chunk = _as_stored(chunk, self.dtype, spec, self.name)
        if self.dtype.kind == "f":
            return np.asarray((chunk / self.scale) + self.offset)
        with np.errstate(over="ignore", divide="ignore"):
            if chunk.size and np.any(chunk % self.scale):
                raise self.error(
                    f"a stored value is not a multiple of scale {int(self.scale)}: its quotient is not "
                    f"a whole {self.dtype}",
                    spec.key,
                )
            off, scale = int(self.offset), int(self.scale)
            self._check_range(chunk, spec.key, lambda x: x // scale + off, f"x / {scale} + {off}")
            return np.asarray(chunk // self.scale + self.offset, dtype=self.dtype)


class CastValueCodec(ArrayArrayCodec):
    """``cast_value`` from one input dtype to the configured ``data_type``; the shape is kept."""

    name = "cast_value"

    def __init__(self, meta: cm.CastValueMeta, dtype: np.dtype, path: str) -> None:
        config = json_path(path, "configuration")
        target = parse_data_type(meta.data_type, json_path(config, "data_type"))
        source = data_type_from_numpy(dtype)
        for role, dt, where in (("input", source, path), ("target", target, json_path(config, "data_type"))):
            if dt.name not in _CAST_SPEC_TYPES:
                raise MetadataError(
                    f"cast_value converts integer and floating-point data only; its {role} is {dt.name}",
                    path=where,
                )
            if dt.name not in _CAST_BACKEND_TYPES:
                raise UnsupportedError(
                    f"cast_value with {role} {dt.name}: cast-value-rs, its backend, converts "
                    f"only {', '.join(sorted(_CAST_BACKEND_TYPES))}",
                    path=where,
                )
        if meta.out_of_range == "wrap" and target.numpy.kind not in "iu":
            raise MetadataError(
                f"out_of_range 'wrap' needs an integer data_type, not {target.name}",
                path=json_path(config, "out_of_range"),
            )
        try:
            import cast_value_rs
        except ImportError:
            raise UnsupportedError(
                f"codec 'cast_value' needs the cast-value-rs package: pip install "
                f"'rectizarr[{CAST_VALUE_EXTRA}]'",
                path=json_path(path, "name"),
            ) from None
        self.backend: Any = cast_value_rs
        self.source, self.target = source.numpy, target.numpy
        self.rounding = meta.rounding
        self.out_of_range = meta.out_of_range
        smap, where = meta.scalar_map, json_path(config, "scalar_map")
        self.encode_map = _pairs(smap.encode if smap else None, source, target, json_path(where, "encode"))
        self.decode_map = _pairs(smap.decode if smap else None, target, source, json_path(where, "decode"))
        self._fills: dict[bytes, np.ndarray] = {}

    def _cast(
        self, arr: np.ndarray, target: np.dtype, pairs: list[tuple[Any, Any]] | None, key: str | None
    ) -> np.ndarray:
        try:
            out = self.backend.cast_array(
                np.asarray(arr, order="C"),
                target_dtype=target,
                rounding_mode=self.rounding,
                out_of_range_mode=self.out_of_range,
                scalar_map_entries=pairs,
            )
        except (ValueError, TypeError, OverflowError) as exc:
            raise self.error(f"cannot cast {arr.dtype} to {target}: {exc}", key) from exc
        return np.asarray(out).reshape(arr.shape)

    def _check_dtype(self, spec: ChunkSpec) -> None:
        if spec.dtype != self.source:
            raise MetadataError(f"cast_value was built for {self.source} input, not {spec.dtype}")

    def resolve(self, spec: ChunkSpec) -> ChunkSpec:
        """The target dtype, and the fill value cast as a chunk is (an error where it cannot be: zarr-python
        cannot read or write such an array either)."""
        self._check_dtype(spec)
        value = np.asarray(spec.fill_value, dtype=self.source)
        fill = self._fills.get(value.tobytes())
        if fill is None:
            fill = self._cast(value.reshape(1), self.target, self.encode_map, spec.key).reshape(())
            fill = self._fills.setdefault(value.tobytes(), fill)
        return replace(spec, dtype=self.target, fill_value=fill)

    def encode(self, chunk: np.ndarray, spec: ChunkSpec) -> np.ndarray:
        self._check_dtype(spec)
        return self._cast(np.asarray(chunk, dtype=self.source), self.target, self.encode_map, spec.key)

    def decode(self, chunk: np.ndarray, spec: ChunkSpec) -> np.ndarray:
        self._check_dtype(spec)
        chunk = _as_stored(chunk, self.target, spec, self.name)
        return self._cast(chunk, self.source, self.decode_map, spec.key)


def _pairs(
    pairs: Sequence[tuple[Any, Any]] | None, frm: DataType, to: DataType, path: str
) -> list[tuple[Any, Any]] | None:
    """A scalar map's pairs as values of ``frm`` and ``to`` (None: no map)."""
    if pairs is None:
        return None
    p = [
        (frm.parse_fill(a, json_path(path, i, 0)), to.parse_fill(b, json_path(path, i, 1)))
        for i, (a, b) in enumerate(pairs)
    ]
    return [(x.item(), y.item()) for x, y in p]


def _as_stored(chunk: np.ndarray, dtype: np.dtype, spec: ChunkSpec, name: str) -> np.ndarray:
    """``chunk`` as the codec after this one decoded it: of ``dtype`` and the chunk's shape (CodecError)."""
    chunk = np.asarray(chunk)
    if chunk.dtype != dtype or chunk.shape != spec.shape:
        raise CodecError(
            f"got {chunk.dtype} {chunk.shape}, expected {dtype} {spec.shape}", key=spec.key, codec=name
        )
    return chunk
