"""The clients compared by ``benchmarks/remote.py`` on one S3 bucket, behind one small interface.

* ``rectizarr (obstore)``   ``rectizarr.open_store(url, backend="obstore", storage_options=...)``
* ``rectizarr (fsspec)``    ``rectizarr.open_store(url, backend="fsspec", ...)`` (an ``FsspecStore`` over s3fs
  where ``open_store`` has no ``backend`` argument)
* ``zarr-python``           zarr-python's default: a URL and ``storage_options`` (its ``FsspecStore``, s3fs)
* ``zarr-python (obstore)`` ``zarr.storage.ObjectStore`` over an ``obstore.store.S3Store``
* ``tensorstore``           the ``zarr3`` driver on the ``s3`` kvstore (``endpoint``, ``aws_region``, and
  ``aws_credentials`` of type ``environment``: ``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY``), one shared
  context

Every client is given the same ``storage_options`` a user passes to s3fs (``key``, ``secret``,
``client_kwargs={"endpoint_url", "region_name"}``), or their equivalent where it has its own names.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

import numpy as np
from impls import Spec, rectizarr_compressors, zarr_json

REGION = "us-east-1"
KEY = SECRET = "testing"


class Unavailable(Exception):
    """This client cannot run here (a missing package, or an API the library does not have yet)."""


class NotApplicable(Exception):
    """This client has no equivalent of the workload (TensorStore has no groups)."""


@dataclass(frozen=True)
class Bucket:
    endpoint: str
    name: str

    def url(self, path: str) -> str:
        return f"s3://{self.name}/{path}"

    @property
    def storage_options(self) -> dict[str, Any]:
        return {
            "key": KEY,
            "secret": SECRET,
            "client_kwargs": {"endpoint_url": self.endpoint, "region_name": REGION},
        }


class Client(ABC):
    name = ""

    def __init__(self, bucket: Bucket) -> None:
        self.bucket = bucket

    @abstractmethod
    def open_array(self, path: str) -> Any: ...

    def read(self, h: Any, sel: Any) -> np.ndarray:
        return np.asarray(h[sel])

    def oindex(self, h: Any, sel: Any) -> np.ndarray:
        return np.asarray(h.oindex[sel])

    @abstractmethod
    def create(self, path: str, spec: Spec) -> Any: ...

    def write(self, h: Any, data: np.ndarray, sharded: bool) -> None:
        h[...] = data

    @abstractmethod
    def open_group(self, path: str, consolidated: bool) -> Any: ...

    def group_keys(self, g: Any) -> list[str]:
        return sorted(g.keys())

    def member_attrs(self, g: Any, name: str) -> dict[str, Any]:
        return dict(g[name].attrs)

    def list_group(self, path: str) -> list[str]:
        """The names of the members of the (unconsolidated) group at ``path``, opened afresh."""
        return self.group_keys(self.open_group(path, consolidated=False))


# ------------------------------------------------------------------------------------------ rectizarr


class _Rectizarr(Client):
    backend = ""

    def __init__(self, bucket: Bucket) -> None:
        super().__init__(bucket)
        self.store("probe", read_only=True)  # Unavailable here, before any timing

    @abstractmethod
    def store(self, path: str, read_only: bool) -> Any: ...

    def open_array(self, path: str) -> Any:
        import rectizarr

        return rectizarr.open_array(self.store(path, True), mode="r")

    def create(self, path: str, spec: Spec) -> Any:
        import rectizarr

        return rectizarr.create_array(
            self.store(path, False),
            shape=spec.shape,
            dtype=spec.dtype,
            chunks=spec.chunks,
            shards=spec.shards,
            compressors=rectizarr_compressors(spec),
            fill_value=0,
        )

    def open_group(self, path: str, consolidated: bool) -> Any:
        import rectizarr

        return rectizarr.open_group(self.store(path, True), mode="r", use_consolidated=consolidated)


class RectizarrObstore(_Rectizarr):
    name = "rectizarr (obstore)"

    def store(self, path: str, read_only: bool) -> Any:
        import rectizarr

        try:
            return rectizarr.open_store(
                self.bucket.url(path),
                mode="r" if read_only else "r+",
                backend="obstore",
                storage_options=self.bucket.storage_options,
            )
        except Exception as e:  # no backend= yet, obstore missing ...: reported, and the others go on
            raise Unavailable(
                f"rectizarr.open_store(..., backend='obstore') failed: {type(e).__name__}: {e}"
            ) from e


class RectizarrFsspec(_Rectizarr):
    name = "rectizarr (fsspec)"

    def store(self, path: str, read_only: bool) -> Any:
        import rectizarr

        url, options = self.bucket.url(path), self.bucket.storage_options
        try:
            return rectizarr.open_store(
                url, mode="r" if read_only else "r+", backend="fsspec", storage_options=options
            )
        except TypeError:  # an open_store without backend=: the fsspec store itself
            from rectizarr.stores import FsspecStore

            return FsspecStore(url, storage_options=options, read_only=read_only)


# ------------------------------------------------------------------------------------------ zarr-python


class _Zarr(Client):
    def _compressors(self, spec: Spec) -> Any:
        from zarr.codecs import ZstdCodec

        assert spec.codec == "zstd", spec.codec
        return ZstdCodec(level=1, checksum=False)

    @abstractmethod
    def _where(self, path: str, read_only: bool) -> dict[str, Any]: ...

    def open_array(self, path: str) -> Any:
        import zarr

        return zarr.open_array(mode="r", **self._where(path, True))

    def create(self, path: str, spec: Spec) -> Any:
        import zarr

        return zarr.create_array(
            shape=spec.shape,
            dtype=spec.dtype,
            chunks=spec.chunks,
            shards=spec.shards,
            compressors=self._compressors(spec),
            fill_value=0,
            **self._where(path, False),
        )

    def open_group(self, path: str, consolidated: bool) -> Any:
        import zarr

        return zarr.open_group(mode="r", use_consolidated=consolidated, **self._where(path, True))


class ZarrPython(_Zarr):
    name = "zarr-python"

    def _where(self, path: str, read_only: bool) -> dict[str, Any]:
        return {"store": self.bucket.url(path), "storage_options": self.bucket.storage_options}


class ZarrObstore(_Zarr):
    name = "zarr-python (obstore)"

    def __init__(self, bucket: Bucket) -> None:
        super().__init__(bucket)
        try:
            import obstore  # noqa: F401
            from zarr.storage import ObjectStore  # noqa: F401
        except ImportError as e:
            raise Unavailable(f"needs obstore and zarr.storage.ObjectStore ({e})") from e

    def _where(self, path: str, read_only: bool) -> dict[str, Any]:
        from obstore.store import S3Store
        from zarr.storage import ObjectStore

        s3 = S3Store(
            self.bucket.name,
            prefix=path,
            endpoint=self.bucket.endpoint,
            access_key_id=KEY,
            secret_access_key=SECRET,
            region=REGION,
            client_options={"allow_http": True},
        )
        return {"store": ObjectStore(s3, read_only=read_only)}


# ------------------------------------------------------------------------------------------ tensorstore


class TensorStore(Client):
    name = "tensorstore"

    def __init__(self, bucket: Bucket) -> None:
        super().__init__(bucket)
        import tensorstore as ts

        self.context = ts.Context()

    def _kvstore(self, path: str) -> dict[str, Any]:
        return {
            "driver": "s3",
            "bucket": self.bucket.name,
            "path": path.rstrip("/") + "/",
            "endpoint": self.bucket.endpoint,
            "aws_region": REGION,
            "aws_credentials": {"type": "environment"},
        }

    def open_array(self, path: str) -> Any:
        import tensorstore as ts

        return ts.open(
            {"driver": "zarr3", "kvstore": self._kvstore(path)}, read=True, context=self.context
        ).result()

    def read(self, h: Any, sel: Any) -> np.ndarray:
        return np.asarray(h[sel].read().result())

    def oindex(self, h: Any, sel: Any) -> np.ndarray:
        return np.asarray(h.oindex[sel].read().result())

    def create(self, path: str, spec: Spec) -> Any:
        import tensorstore as ts

        ts_spec = {"driver": "zarr3", "kvstore": self._kvstore(path), "metadata": zarr_json(spec)}
        return ts.open(ts_spec, create=True, context=self.context).result()

    def write(self, h: Any, data: np.ndarray, sharded: bool) -> None:
        import tensorstore as ts

        if sharded:  # without a transaction every inner chunk write is a read-modify-write of its shard
            with ts.Transaction() as txn:
                h.with_transaction(txn).write(data).result()
        else:
            h.write(data).result()

    def open_group(self, path: str, consolidated: bool) -> Any:
        raise NotApplicable("no groups")

    def list_group(self, path: str) -> list[str]:
        """TensorStore has no groups: its kvstore's listing of the prefix (recursive), cut to member names."""
        import tensorstore as ts

        kv = ts.KvStore.open(self._kvstore(path), context=self.context).result()
        keys = [k.decode() for k in kv.list().result()]
        return sorted({k.split("/", 1)[0] for k in keys if "/" in k})


# ------------------------------------------------------------------------------------------ limit


class ObstoreAlone(Client):
    """Not a Zarr client: the requests of the full reads and writes and nothing else. Reads GET every
    stored object of the array (its chunks or shards); writes PUT the same objects (the bytes rectizarr
    stored) under the new path and its ``zarr.json``. obstore's blocking calls on 64 threads (64 in flight), nothing
    decoded or encoded: what any client's request pattern costs on this server."""

    name = "limit: obstore alone, same requests"
    limit = True

    def __init__(self, bucket: Bucket) -> None:
        super().__init__(bucket)
        try:
            import obstore
            from obstore.store import S3Store
        except ImportError as e:
            raise Unavailable("obstore is not installed") from e
        self.obstore = obstore
        self.s3 = S3Store(
            bucket.name,
            endpoint=bucket.endpoint,
            access_key_id=KEY,
            secret_access_key=SECRET,
            region=REGION,
            client_options={"allow_http": True},
        )
        self.objects = {path: self._load(path) for path in ("chunked.zarr", "sharded.zarr")}  # untimed
        self._pool: Any = None

    def _load(self, path: str) -> dict[str, bytes]:
        keys = [m["path"] for batch in self.obstore.list(self.s3, path + "/") for m in batch]
        return {k[len(path) + 1 :]: bytes(self.obstore.get(self.s3, k).bytes()) for k in keys}

    def _run(self, calls: list[Any]) -> list[Any]:
        """Every call on 64 threads: obstore's blocking calls, the cheaper way to keep 64 requests in flight
        from Python (256 GETs: 41 ms against 63 ms for its coroutines on an asyncio loop, at 0 ms)."""
        from concurrent.futures import ThreadPoolExecutor

        if self._pool is None:
            self._pool = ThreadPoolExecutor(64)
        return list(self._pool.map(lambda call: call(), calls))

    def open_array(self, path: str) -> Any:
        if path not in self.objects:
            raise NotApplicable("reads and writes of whole arrays only")
        return path

    def read(self, h: Any, sel: Any) -> np.ndarray:
        if sel is not Ellipsis:
            raise NotApplicable("reads and writes of whole arrays only")

        def get(key: str) -> bytes:
            return bytes(self.obstore.get(self.s3, f"{h}/{key}").bytes())

        self._run([lambda k=k: get(k) for k in self.objects[h] if k != "zarr.json"])
        return np.empty(0)

    def oindex(self, h: Any, sel: Any) -> np.ndarray:
        raise NotApplicable("reads and writes of whole arrays only")

    def create(self, path: str, spec: Spec) -> Any:
        return path, self.objects["sharded.zarr" if spec.shards else "chunked.zarr"]

    def write(self, h: Any, data: np.ndarray, sharded: bool) -> None:
        path, objects = h

        def put(key: str, value: bytes) -> None:
            self.obstore.put(self.s3, f"{path}/{key}", value)

        self._run([lambda k=k, v=v: put(k, v) for k, v in objects.items()])

    def open_group(self, path: str, consolidated: bool) -> Any:
        raise NotApplicable("not a Zarr client")

    def list_group(self, path: str) -> list[str]:
        raise NotApplicable("not a Zarr client")


CLIENTS: list[type[Client]] = [
    RectizarrObstore,
    RectizarrFsspec,
    ZarrPython,
    ZarrObstore,
    TensorStore,
    ObstoreAlone,
]
