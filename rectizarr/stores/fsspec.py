"""A store over any fsspec filesystem (s3, gcs, http, memory, file, zip:: chains, caches ...):
:class:`FsspecStore`, which is made as the subclass for its filesystem where there is one (S3: conditional
writes; HTTP: read-only URLs)."""

from __future__ import annotations

from rectizarr.stores.fsspec_base import FsspecStore
from rectizarr.stores.fsspec_http import HttpFsspecStore
from rectizarr.stores.fsspec_s3 import S3FsspecStore

__all__ = ["FsspecStore", "HttpFsspecStore", "S3FsspecStore"]
