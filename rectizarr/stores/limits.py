"""The limits every store follows: how large a metadata document may be, and how many requests a remote
store keeps in flight (``Tuning.requests_in_flight``)."""

from __future__ import annotations

from rectizarr import tuning
from rectizarr._util import is_int

_max_document = 64 << 20

DOCUMENTS = frozenset({"zarr.json", ".zarray", ".zgroup", ".zattrs", ".zmetadata"})
"""The names of metadata documents: a value whose key ends with one is read with :func:`max_document_bytes`
as its limit."""


def is_document(key: str) -> bool:
    """Whether ``key`` names a metadata document (its last segment is one of :data:`DOCUMENTS`)."""
    return key.rpartition("/")[2] in DOCUMENTS


def max_document_bytes() -> int:
    """The most bytes a metadata document (:data:`DOCUMENTS`) may take (default 64 MiB): zip archives and
    remote stores refuse a larger one (``StoreError``) before reading it, or once that many bytes came."""
    return _max_document


def set_max_document_bytes(n: int) -> None:
    """Set :func:`max_document_bytes` (a hierarchy whose consolidated metadata is larger than 64 MiB)."""
    global _max_document
    if not is_int(n) or n < 1:
        raise ValueError(f"the metadata document limit must be an int >= 1, got {n!r}")
    _max_document = int(n)


def set_requests_in_flight(n: int) -> None:
    """How many requests a batched read or write of a remote store (both backends) keeps in flight; default
    64. More hides more latency; fewer spares a slow or metered link. Stores made before keep their
    connection pools (fsspec) but follow it. The process default of ``Tuning.requests_in_flight``."""
    if not is_int(n) or n < 1:
        raise ValueError(f"requests in flight must be an int >= 1, got {n!r}")
    tuning.set_default(requests_in_flight=int(n))


def requests_in_flight() -> int:
    """``Tuning.requests_in_flight`` in force (:func:`set_requests_in_flight`; default 64)."""
    return tuning.current().requests_in_flight
