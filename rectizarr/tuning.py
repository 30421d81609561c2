"""Every performance threshold of rectizarr, in one frozen dataclass.

Each field says why it has its value and which ``make bench`` row set it (see benchmarks/README.md for the
rows). A threshold changes *how* data moves, never *what* is read or written: any value gives the same
results, so tests may set extreme values to drive every strategy::

    from dataclasses import replace
    from rectizarr import tuning

    with tuning.use(replace(tuning.current(), slab_min_chunks=1)):
        ...

The active tuning is a context variable: a read or write takes it once, in the calling thread, and the
I/O layer's thread pool runs its work in that context.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

__all__ = ["DEFAULT", "Tuning", "current", "use"]

KiB, MiB = 1 << 10, 1 << 20


@dataclass(frozen=True, slots=True)
class Tuning:
    """The thresholds; the defaults are what the benchmarks chose on a 2-core machine."""

    # ---- threads ------------------------------------------------------------------------------------
    threaded_bytes: int = 256 * KiB
    """Decoded size of a raw chunk from which per-chunk work goes to several threads; below it the work is
    mostly Python holding the GIL and two threads only hand it back and forth (T1 vs R1 raw)."""
    threaded_bytes_coded: int = 64 * KiB
    """The same for chunks with a compressor, whose decode releases the GIL (R1 zstd, T2)."""
    batches_per_thread: int = 4
    """Items of a parallel map are sent in about this many batches per thread: one task per tiny chunk
    costs more than its work (T1, T2 with 100,000 chunks)."""
    whole_shards_per_thread: int = 2
    """Whole shards of local data are read shard by shard in the workers from this many shards per
    thread (else fetched first, their inner chunks spread over the workers) (R1 sharded)."""

    # ---- reading many chunks ------------------------------------------------------------------------
    sparse_min_chunks: int = 4096
    """Touched chunks from which a read first lists which of them are stored, to visit only those (M2,
    and huge mostly-empty selections)."""
    sparse_max_fraction: float = 0.25
    """A listing pays only when at most this fraction of the touched chunks (or shards) is stored."""
    sparse_probes: int = 16
    """Chunks probed with an existence check, spread over a large read, to tell a dense read (no
    listing) from a sparse one."""
    window_bytes: int = 64 * MiB
    """Decoded bytes of chunks a read fetches at once from a store with round trips: bounds memory next
    to the output (P1)."""
    slab_min_chunks: int = 64
    """Small raw chunks of a local directory from which a dense block is read slab by slab, straight
    into a staging buffer (T1)."""
    slab_max_bytes: int = 64 * MiB
    """Most staging bytes one slab of a slab read may take (T1; memory)."""

    # ---- one chunk ----------------------------------------------------------------------------------
    scratch_max_bytes: int = 16 * MiB
    """Largest chunk decoded through a per-thread reused scratch buffer before pasting (R1, L1): fresh
    memory per chunk costs page faults."""
    prefix_min_bytes: int = 64 * KiB
    """Decoded chunk size from which a read that needs only the start of a chunk decodes only that far
    (L1, 16 elements)."""
    prefix_max_fraction: float = 0.85
    """... when it needs at most this fraction of the chunk; beyond, a whole decode costs no more (L1)."""
    small_read_projections: int = 8
    """Reads of at most this many chunks are grouped by shard in plain integers, not arrays (L1)."""
    shard_group_block: int = 4096
    """Projections grouped by shard per block of integer rows (T2: bounds the temporary lists)."""

    # ---- shards -------------------------------------------------------------------------------------
    piecewise_bytes: int = 64 * KiB
    """Decoded inner chunk size from which local shards are read inner chunk by inner chunk, even when
    whole: one read of a 64 MiB shard costs more than its 64 ranged reads (R1 sharded, P1)."""
    assemble_numpy_bytes: int = 4 * MiB
    """Shard size from which a shard is assembled in a NumPy buffer rather than by joining bytes (W1
    sharded)."""

    # ---- stores and metadata ------------------------------------------------------------------------
    transient_max_bytes: int = 16 * MiB
    """Largest value a local read puts in its thread's reused buffer; larger ones get fresh memory (R1
    sharded, L1: a 1 MiB read into fresh memory costs 4x one into a reused buffer)."""
    bincount_edges: int = 4096
    """Edges of a rectilinear axis from which its distinct edges are found by counting rather than
    sorting (M2: opening an axis of a million edges, 5x faster)."""


DEFAULT = Tuning()
_active: contextvars.ContextVar[Tuning] = contextvars.ContextVar("rectizarr_tuning", default=DEFAULT)


def current() -> Tuning:
    """The tuning in force in this context."""
    return _active.get()


@contextmanager
def use(tuning: Tuning) -> Iterator[Tuning]:
    """Run the ``with`` block (and the I/O work it starts) with ``tuning``."""
    token = _active.set(tuning)
    try:
        yield tuning
    finally:
        _active.reset(token)
