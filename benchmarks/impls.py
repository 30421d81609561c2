"""The implementations compared by ``benchmarks/run.py``, behind one small interface.

Every implementation opens the same directory and reads or writes the same Zarr v3 bytes:

* ``rectizarr``          this library, default settings (threads = usable cores)
* ``zarr-python``        zarr-python with its default ``BatchedCodecPipeline``
* ``zarr-python+zarrs``  zarr-python with ``codec_pipeline.path = zarrs.ZarrsCodecPipeline``
* ``tensorstore``        TensorStore's ``zarr3`` driver on the ``file`` kvstore, ``file_io_sync`` off, one shared
  context (default cache pool: none); sharded writes run in one transaction, as TensorStore recommends

The heavy libraries are imported on first use, so ``run.py --only I1`` measures fresh imports elsewhere.
"""

from __future__ import annotations

import contextlib
import json
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

ZARRS_PIPELINE = "zarrs.ZarrsCodecPipeline"


@dataclass(frozen=True)
class Spec:
    """A regular array to create: ``codec`` is ``raw`` (bytes only), ``zstd`` (level 1) or ``blosc-lz4``."""

    shape: tuple[int, ...]
    dtype: str
    chunks: tuple[int, ...]
    shards: tuple[int, ...] | None = None
    codec: str = "zstd"

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape)) * np.dtype(self.dtype).itemsize


def rectizarr_compressors(spec: Spec) -> list[dict[str, Any]]:
    if spec.codec == "raw":
        return []
    if spec.codec == "zstd":
        return [{"name": "zstd", "configuration": {"level": 1, "checksum": False}}]
    if spec.codec == "blosc-lz4":
        return [
            {
                "name": "blosc",
                "configuration": {
                    "cname": "lz4",
                    "clevel": 5,
                    "shuffle": "shuffle",
                    "typesize": np.dtype(spec.dtype).itemsize,
                    "blocksize": 0,
                },
            }
        ]
    raise ValueError(spec.codec)


def zarr_json(spec: Spec) -> dict[str, Any]:
    """The ``zarr.json`` rectizarr writes for ``spec`` (TensorStore creates its arrays from it)."""
    import rectizarr

    store = rectizarr.MemoryStore()
    rectizarr.create_array(
        store,
        shape=spec.shape,
        dtype=spec.dtype,
        chunks=spec.chunks,
        shards=spec.shards,
        compressors=rectizarr_compressors(spec),
        fill_value=0,
    )
    meta = json.loads(store.get("zarr.json") or b"{}")
    return {
        k: meta[k]
        for k in (
            "zarr_format",
            "node_type",
            "shape",
            "data_type",
            "chunk_grid",
            "chunk_key_encoding",
            "fill_value",
            "codecs",
        )
    }


class Impl(ABC):
    name = ""

    @abstractmethod
    def open(self, path: str) -> Any: ...

    @abstractmethod
    def read(self, h: Any, sel: Any = Ellipsis) -> np.ndarray: ...

    @abstractmethod
    def oindex(self, h: Any, sel: Any) -> np.ndarray: ...

    @abstractmethod
    def vindex(self, h: Any, sel: Any) -> np.ndarray: ...

    @abstractmethod
    def create(self, path: str, spec: Spec) -> Any: ...

    @abstractmethod
    def write(self, h: Any, data: np.ndarray, sharded: bool) -> None: ...

    def set_point(self, h: Any, index: tuple[int, ...], value: Any) -> None:
        """One element written through a handle kept open (a read-modify-write of its chunk)."""
        h[index] = value


class Rectizarr(Impl):
    name = "rectizarr"

    def open(self, path: str) -> Any:
        import rectizarr

        return rectizarr.open_array(path, mode="r")

    def read(self, h: Any, sel: Any = Ellipsis) -> np.ndarray:
        return np.asarray(h[sel])

    def oindex(self, h: Any, sel: Any) -> np.ndarray:
        return np.asarray(h.oindex[sel])

    def vindex(self, h: Any, sel: Any) -> np.ndarray:
        return np.asarray(h.vindex[sel])

    def create(self, path: str, spec: Spec) -> Any:
        import rectizarr

        return rectizarr.create_array(
            path,
            shape=spec.shape,
            dtype=spec.dtype,
            chunks=spec.chunks,
            shards=spec.shards,
            compressors=rectizarr_compressors(spec),
            fill_value=0,
            overwrite=True,
        )

    def write(self, h: Any, data: np.ndarray, sharded: bool) -> None:
        h[...] = data


class ZarrPython(Impl):
    name = "zarr-python"
    pipeline: str | None = None

    @contextlib.contextmanager
    def _ctx(self) -> Iterator[None]:
        import zarr

        if self.pipeline is None:
            yield
        else:
            with zarr.config.set({"codec_pipeline.path": self.pipeline}):
                yield

    def open(self, path: str) -> Any:
        import zarr

        with self._ctx():
            return zarr.open_array(path, mode="r")

    def read(self, h: Any, sel: Any = Ellipsis) -> np.ndarray:
        with self._ctx():
            return np.asarray(h[sel])

    def oindex(self, h: Any, sel: Any) -> np.ndarray:
        with self._ctx():
            return np.asarray(h.oindex[sel])

    def vindex(self, h: Any, sel: Any) -> np.ndarray:
        with self._ctx():
            return np.asarray(h.vindex[sel])

    def _compressors(self, spec: Spec) -> Any:
        from zarr.codecs import BloscCodec, ZstdCodec

        if spec.codec == "raw":
            return None
        if spec.codec == "zstd":
            return ZstdCodec(level=1, checksum=False)
        return BloscCodec(
            cname="lz4", clevel=5, shuffle="shuffle", typesize=np.dtype(spec.dtype).itemsize, blocksize=0
        )

    def create(self, path: str, spec: Spec) -> Any:
        import zarr

        with self._ctx():
            return zarr.create_array(
                store=path,
                shape=spec.shape,
                dtype=spec.dtype,
                chunks=spec.chunks,
                shards=spec.shards,
                compressors=self._compressors(spec),
                fill_value=0,
                overwrite=True,
            )

    def write(self, h: Any, data: np.ndarray, sharded: bool) -> None:
        with self._ctx():
            h[...] = data

    def set_point(self, h: Any, index: tuple[int, ...], value: Any) -> None:
        with self._ctx():
            h[index] = value


class ZarrsPipeline(ZarrPython):
    name = "zarr-python+zarrs"
    pipeline = ZARRS_PIPELINE


class TensorStore(Impl):
    name = "tensorstore"
    _context: Any = None

    @classmethod
    def context(cls) -> Any:
        import tensorstore as ts

        if cls._context is None:
            cls._context = ts.Context({"file_io_sync": False})
        return cls._context

    def open(self, path: str) -> Any:
        import tensorstore as ts

        spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": path}}
        return ts.open(spec, read=True, context=self.context()).result()

    def read(self, h: Any, sel: Any = Ellipsis) -> np.ndarray:
        return np.asarray(h[sel].read().result())

    def oindex(self, h: Any, sel: Any) -> np.ndarray:
        return np.asarray(h.oindex[sel].read().result())

    def vindex(self, h: Any, sel: Any) -> np.ndarray:
        return np.asarray(h.vindex[sel].read().result())

    def set_point(self, h: Any, index: tuple[int, ...], value: Any) -> None:
        h[index].write(value).result()

    def create(self, path: str, spec: Spec) -> Any:
        import tensorstore as ts

        ts_spec = {
            "driver": "zarr3",
            "kvstore": {"driver": "file", "path": path},
            "metadata": zarr_json(spec),
        }
        return ts.open(ts_spec, create=True, delete_existing=True, context=self.context()).result()

    def write(self, h: Any, data: np.ndarray, sharded: bool) -> None:
        import tensorstore as ts

        if sharded:  # without a transaction every inner chunk write is a read-modify-write of its shard
            with ts.Transaction() as txn:
                h.with_transaction(txn).write(data).result()
        else:
            h.write(data).result()


IMPLS: list[Impl] = [Rectizarr(), ZarrPython(), ZarrsPipeline(), TensorStore()]
BY_NAME = {impl.name: impl for impl in IMPLS}
