"""What this process wrote of the metadata documents (:data:`~rectizarr.stores.limits.DOCUMENTS`),
whichever handle or store object wrote them.

Where a version costs a request (S3, GCS, Azure, HTTP), a handle keeps the document it read, yet must
see what this process changed through another handle (an append through ``group["x"]`` rewrites
``x/zarr.json``: the next ``group["x"]`` shows the new shape). :func:`mark` counts the writes of each
document by the name of the data (``store.lock_identity + key``); a handle compares :func:`token` to know
whether to read its document again. Deleting under a prefix, or forgetting very many counts, moves an
epoch that every token includes: every handle then reads its document once more."""

from __future__ import annotations

import threading
from collections.abc import Iterable

from rectizarr._util import in_forked_child
from rectizarr.stores.limits import is_document

_MOST = 1 << 16  # documents counted before the counts are forgotten (and the epoch moves)

_lock = threading.Lock()
_counts: dict[str, int] = {}
_epoch = 0


@in_forked_child
def _relock() -> None:  # pragma: no cover - runs in forked children
    global _lock
    _lock = threading.Lock()


def mark(identity: str, keys: Iterable[str]) -> None:
    """Count a write (or deletion) of each document among ``keys`` of the store named ``identity``."""
    global _epoch
    docs = [identity + k for k in keys if is_document(k)]
    if not docs:
        return
    with _lock:
        if len(_counts) + len(docs) > _MOST:
            _counts.clear()
            _epoch += 1
        for name in docs:
            _counts[name] = _counts.get(name, 0) + 1


def forget() -> None:
    """Something was deleted under a prefix (which documents is unknown): every handle rereads its own."""
    global _epoch
    with _lock:
        _epoch += 1


def token(identity: str, keys: Iterable[str]) -> tuple[int, ...]:
    """What changes whenever this process writes one of ``keys`` (or deletes under a prefix)."""
    return (_epoch, *(_counts.get(identity + k, 0) for k in keys))
