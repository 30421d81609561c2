"""The array->bytes step of Zarr v2 arrays with filters: what zarr-python 2 does between a chunk and its
compressor, exactly (byte order of the declared dtype, ``order`` "C"/"F", each numcodecs filter in turn).

Object arrays go through their object codec (``vlen-utf8``, ``vlen-bytes``, ``vlen-array``, ``json2``,
``msgpack2``, ``categorize``, ...). ``pickle`` runs code while decoding, so it is refused unless the
environment variable ``RECTIZARR_ALLOW_PICKLE=1`` opts in (for data you trust)."""

from __future__ import annotations

import os
import pickle
from collections.abc import Sequence
from typing import Any

import numpy as np

from rectizarr._util import json_path
from rectizarr.codecs.base import ArrayBytesCodec, ChunkSpec
from rectizarr.codecs.bytes_to_bytes import get_numcodec
from rectizarr.errors import CodecError, MetadataError, UnsupportedError

ALLOW_PICKLE_ENV = "RECTIZARR_ALLOW_PICKLE"


_VLEN = frozenset({"vlen-utf8", "vlen-bytes", "vlen-array"})


def _check_count(value: Any, n: int, spec: ChunkSpec, cid: str) -> None:
    """The item count a vlen chunk declares must be the chunk's: numcodecs allocates what it declares."""
    head = (
        bytes(memoryview(value).cast("B")[:4]) if not isinstance(value, np.ndarray) else value.tobytes()[:4]
    )
    if len(head) < 4 or int.from_bytes(head, "little") != n:
        declared = int.from_bytes(head, "little") if len(head) == 4 else None
        raise CodecError(
            f"the chunk declares {declared} items, the chunk has {n} ({spec.shape})", key=spec.key, codec=cid
        )


class _Pickle:
    """numcodecs' ``pickle`` object codec (a pickled object ndarray), once the user opted in."""

    def __init__(self, protocol: int) -> None:
        self.protocol = protocol

    def encode(self, arr: Any) -> bytes:
        return pickle.dumps(np.asarray(arr, dtype=object), protocol=self.protocol)

    def decode(self, data: Any) -> Any:
        return pickle.loads(bytes(data))


class V2ChunkCodec(ArrayBytesCodec):
    """Chunks of a v2 array with filters: native array -> declared dtype in ``order`` -> filters -> bytes."""

    name = "zarr_v2.filters"

    def __init__(self, declared: np.dtype, order: str, filters: Sequence[dict[str, Any]], path: str) -> None:
        self.declared, self.order = declared, order
        objs = []
        self.ids = tuple(str(config["id"]) for config in filters)
        for i, (cid, config) in enumerate(zip(self.ids, filters, strict=True)):
            if cid == "pickle" and os.environ.get(ALLOW_PICKLE_ENV, "") not in ("1", "true", "yes"):
                raise UnsupportedError(
                    f"the 'pickle' filter runs code when it decodes; set {ALLOW_PICKLE_ENV}=1 to read data you "
                    "trust",
                    path=json_path(path, "configuration", "filters", i),
                )
            if cid == "pickle":  # numcodecs refuses to unpickle unless its own global flag is set
                objs.append(_Pickle(int(config.get("protocol", 5))))
                continue
            try:
                objs.append(get_numcodec(cid, cid, {k: v for k, v in config.items() if k != "id"}))
            except MetadataError as exc:
                raise type(exc)(str(exc), path=json_path(path, "configuration", "filters", i)) from exc
        self.filters = tuple(objs)

    def validate(self, dtype: np.dtype, edges_per_axis: Sequence[np.ndarray]) -> None:
        if dtype.hasobject and not self.filters:
            raise MetadataError("an object array needs an object codec among its filters")

    def encode(self, chunk: np.ndarray, spec: ChunkSpec) -> bytes:
        arr = np.asarray(chunk)
        if arr.shape != spec.shape:
            arr = np.broadcast_to(arr, spec.shape)
        if self.declared.kind != "O":
            arr = arr.astype(self.declared, copy=False)
        data: Any = np.asfortranarray(arr) if self.order == "F" else np.ascontiguousarray(arr)
        if not data.flags.writeable:  # a broadcast scalar: numcodecs' VLenBytes refuses read-only buffers
            data = data.copy(order="K")
        try:
            for f in self.filters:
                data = f.encode(data)
        except Exception as exc:
            raise self.error(f"encoding failed: {exc}", spec.key) from exc
        out = np.asarray(data) if not isinstance(data, bytes | bytearray | memoryview) else data
        if isinstance(out, np.ndarray):
            if out.dtype.hasobject:
                raise self.error("the filters left Python objects; an object codec is missing", spec.key)
            return out.reshape(-1, order="A").tobytes(order="A")
        return bytes(out)

    def decode(self, data: bytes | memoryview, spec: ChunkSpec) -> np.ndarray:
        value: Any = data
        n = int(np.prod(spec.shape, dtype=np.int64))
        try:
            for cid, f in zip(reversed(self.ids), reversed(self.filters), strict=True):
                if cid in _VLEN:
                    _check_count(value, n, spec, cid)
                value = f.decode(value)
            if self.declared.kind == "O":
                arr = np.asarray(value, dtype=object) if not isinstance(value, np.ndarray) else value
            else:
                arr = np.frombuffer(value, dtype=np.uint8) if not isinstance(value, np.ndarray) else value
                arr = np.ascontiguousarray(arr).reshape(-1).view(np.uint8).view(self.declared)
        except CodecError:
            raise
        except Exception as exc:
            raise self.error(f"decoding failed: {exc}", spec.key) from exc
        if arr.size != n:
            raise self.error(f"decoded {arr.size} elements, the chunk has {n} ({spec.shape})", spec.key)
        if not (self.declared.kind == "O" and arr.ndim > 1 and arr.shape == spec.shape):
            # (object codecs that keep the shape, json2 and msgpack2, give the values in place already)
            arr = arr.reshape(-1, order="A").reshape(spec.shape, order=self.order)  # type: ignore[call-overload]
        out: np.ndarray = arr.astype(spec.dtype, copy=False)
        return out
