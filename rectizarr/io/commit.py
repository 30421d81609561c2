"""The end of every write path: encode on the workers, then store the values and delete emptied chunks."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

from rectizarr.io import cache
from rectizarr.io.layout import Layout
from rectizarr.io.pool import pmap, pool_size
from rectizarr.stores import Buffer, Store
from rectizarr.tuning import Tuning

__all__ = ["commit", "encode_and_commit"]

T = TypeVar("T")
Encoded = tuple[str, Buffer | None]  # (key, value); None: the chunk is empty (delete it)


def encode_and_commit(layout: Layout, items: Sequence[T], work: Callable[[T], Encoded], known_absent: set[str],
                      workers: int | None, t: Tuning) -> None:
    """Encode with ``work`` (item -> key and value, ``None`` for an empty chunk) on the workers and store
    the results. Local data whose encoding cannot fail is written batch by batch in the workers as it is
    encoded (writes overlap encoding; memory stays flat); otherwise everything is encoded first and
    written at once, so an encoding error writes nothing. ``known_absent`` keys need no delete."""
    if not (layout.store.capabilities.low_latency and layout.pipeline.encode_cannot_fail(layout.dtype)):
        commit(layout.store, pmap(work, items, workers), known_absent)
        return
    n_threads = pool_size() if workers is None else workers
    per = max(1, -(-len(items) // (t.batches_per_thread * n_threads)))

    def run(batch: Sequence[T]) -> list[str]:
        results = [work(item) for item in batch]
        to_set = {k: v for k, v in results if v is not None}
        if to_set:
            layout.store.set_many(to_set)
        cache.invalidate(layout.store, to_set)
        return [k for k, v in results if v is None]

    empty = [k for part in pmap(run, [items[i : i + per] for i in range(0, len(items), per)], workers)
             for k in part]
    commit(layout.store, [(k, None) for k in empty], known_absent)


def commit(store: Store, results: Iterable[Encoded], known_absent: set[str] | frozenset[str] = frozenset()) -> None:
    """Store every value of ``results`` and delete every key whose value is None (unless known absent)."""
    results = list(results)
    to_set = {k: v for k, v in results if v is not None}
    to_delete = [k for k, v in results if v is None and k not in known_absent]
    if to_set:
        store.set_many(to_set)
    if to_delete:
        store.delete_many(to_delete)
    cache.invalidate(store, (*to_set, *to_delete))
