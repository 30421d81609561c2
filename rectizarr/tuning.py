"""Every performance threshold of rectizarr, in one frozen dataclass.

Each field has a one-line reason and, in brackets, the ``make bench`` row that set it (benchmarks/README.md).
A threshold changes *how* data moves, never *what* is read or written, so tests may set extreme values to
drive every strategy: ``with tuning.use(replace(tuning.current(), block_min_chunks=1)): ...``. The active
tuning is a context variable: a read or write takes it in the calling thread, and the I/O layer's thread
pool runs its work in that context."""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

__all__ = ["DEFAULT", "Tuning", "current", "set_default", "use"]

KiB, MiB = 1 << 10, 1 << 20


@dataclass(frozen=True, slots=True)
class Tuning:
    """The thresholds; the defaults are what the benchmarks chose on a 2-core machine."""

    threaded_bytes: int = 256 * KiB
    """Raw chunk size from which per-chunk work uses threads; below, the GIL only changes hands [T1, R1 raw]."""
    threaded_bytes_coded: int = 64 * KiB
    """The same for chunks with a compressor, whose decode releases the GIL [R1 zstd, T2]."""
    batches_per_thread: int = 4
    """A parallel map sends about this many batches per thread: a task per tiny chunk costs more [T1, T2]."""
    whole_shards_per_thread: int = 2
    """From this many local shards per thread, each worker reads, splits and decodes its own [R1 sharded]."""
    sparse_min_chunks: int = 4096
    """Touched chunks from which a read first lists which of them are stored [M2, sparse huge reads]."""
    sparse_max_fraction: float = 0.25
    """... and visits only those when at most this fraction of the touched chunks (or shards) is stored."""
    sparse_probes: int = 16
    """Existence checks spread over a large read that tell a dense read (no listing) from a sparse one."""
    window_bytes: int = 64 * MiB
    """Decoded bytes fetched at once from a store with round trips: memory stays bounded [P1]."""
    block_min_chunks: int = 64
    """Small local chunks from which a dense block is read batch by batch (:mod:`rectizarr.io.blocks`) [T1]."""
    batch_bytes: int = 1 * MiB
    """Decoded bytes per batch of a block read: a staging array this size stays in cache while it is
    decoded into and pasted from, and Python's work per batch is spread over this many bytes [T1z, S1]."""
    block_coded_bytes: int = 128 * KiB
    """Coded chunk size below which a dense local read goes batch by batch, each batch's chunks
    batch-decoded on a worker (64 KiB zstd chunks: 34-36 vs 37-40 ms for 32 MiB; from 128 KiB on, no
    faster) [T1z]."""
    scratch_max_bytes: int = 16 * MiB
    """Largest chunk decoded into a reused per-thread buffer before pasting: no page faults [R1, L1]."""
    prefix_min_bytes: int = 64 * KiB
    """Chunk size from which a read needing only a chunk's start decodes only that far [L1 16 elements]."""
    prefix_max_fraction: float = 0.85
    """... when it needs at most this fraction of the chunk; beyond, a whole decode costs no more [L1]."""
    small_read_projections: int = 8
    """Reads of at most this many chunks are grouped by shard in plain integers, not arrays [L1]."""
    shard_group_block: int = 4096
    """Projections grouped by shard per block of integer rows: bounds the temporary lists [T2]."""
    piecewise_bytes: int = 64 * KiB
    """Inner chunk size from which local shards are read inner chunk by inner chunk [R1 sharded, P1]."""
    handover_bytes: int = 64 * MiB
    """Decoded chunks an append's check of its edge chunks hands to the data write that follows, which
    would decode the same bytes again (one decode per append, not two) [A1 regular grid]."""
    encoded_slack_bytes: int = 1024
    """Bytes an inner chunk's encoding may exceed its decoded size by before the buffer a shard is
    encoded into grows (compressors rarely exceed it) [W1 sharded]."""
    assemble_numpy_bytes: int = 4 * MiB
    """Shard size from which a shard is assembled in a NumPy buffer instead of joined bytes [W1 sharded]."""
    reused_value_bytes: int = 4 * MiB
    """Value size from which a local write stores each value before it makes the next, in one buffer per
    thread for the whole write (fresh memory per 64 MiB shard cost a fifth of W1 raw sharded) [W1 sharded]."""
    prefault_bytes: int = 256 * KiB
    """Output size from which a read from a store with round trips has the output's pages made while its
    requests are in flight, rather than by the first writes after the data arrives [remote read sharded]."""
    transient_max_bytes: int = 16 * MiB
    """Largest value a local read puts in its thread's reused buffer (fresh memory costs 4x) [R1, L1]."""
    conflict_retries: int = 16
    """Conditional writes of a document (S3) re-read and re-applied this often before a ConflictError."""
    bincount_edges: int = 4096
    """Edges of a rectilinear axis from which distinct edges are counted, not sorted: 5x faster [M2]."""
    few_chunks: int = 16
    """A slice over fewer chunks of an axis than this is planned in plain Python integers, not NumPy [L1]."""
    grid_split_bytes: int = 4096
    """Raw ``chunk_grid`` JSON longer than this has its edge lists parsed by NumPy; shorter, the general
    JSON path costs only microseconds [M2]."""
    coalesce_gap: int = 64 * KiB
    """Default for local, in-memory and zip stores: ranges of one value closer than this are read as one."""
    coalesce_max: int = 16 * MiB
    """... as long as the merged range stays within this many bytes."""
    local_threaded_bytes: int = 4 * MiB
    """A local store's batch of this many bytes goes to its threads: a hand-off costs more than small work
    (reads of a 2 KiB shard index, one vs two threads: 8, 42 vs 200 us; 64, 248 vs 450 us) [R1 sharded, W1]."""
    local_threaded_files: int = 16
    """... or of this many whole files of unknown size read (8 whole 2 MiB files: 2.5 vs 2.8 ms, 16: 5.9 vs
    5.0 ms); fewer are sized with a ``stat`` each first [R1 sharded]."""
    local_threaded_writes: int = 64
    """... or of this many values written (16 files of 1 KiB: 2.0 vs 2.3 ms, 256: 33 vs 24 ms) [W1, T1]."""
    local_open_dirs: int = 256
    """Directory descriptors a local batch write holds at once (one per directory written to)."""
    zstd_frames_per_thread: int = 2048
    """zstd frames per thread from which one batch call decodes on threads (an eighth of that encodes):
    below, starting the threads, which the call does each time, costs more than they save [T1z]."""
    zstd_large_frame: int = 8 * KiB
    """Decoded frame size from which zstd frames decode one by one straight into their rows rather than
    through one batch call whose output is copied (2 MiB in 8 KiB frames: 2.6 vs 3.5 ms; 2 KiB frames:
    the batch wins, 4.5 vs 4.9 ms) [T1z]."""
    zstd_count_buffer: int = 1 * MiB
    """The buffer through which the decoded size of zstd data is counted: memory stays bounded."""
    requests_in_flight: int = 64
    """Requests a batched read or write of a remote store keeps in flight (:func:`rectizarr.set_requests_in_flight`
    sets the process default) [remote read sharded]."""
    remote_coalesce_gap: int = 1 * MiB
    """Ranges of one remote value closer than this are read with one request: a round trip costs more than
    the bytes between them (the default ``coalesce_gap`` of remote stores) [remote read sharded]."""
    remote_coalesce_max: int = 32 * MiB
    """The most bytes one coalesced remote request spans (the default ``coalesce_max`` of remote stores)."""
    no_huge_pages_bytes: int = 512 * MiB
    """Arrays from this size up are made with ordinary pages, not transparent huge ones, which cost more
    when fresh (the measurements: :func:`rectizarr.pages.empty`)."""
    populate_step: int = 2 * MiB
    """Bytes of an output whose pages are made with one ``madvise`` call: the memory map's lock is never
    held long (:func:`rectizarr.pages.populate`)."""


DEFAULT = Tuning()
_default = DEFAULT  # the process's tuning where no use() is in force (set_default)
_active: contextvars.ContextVar[Tuning | None] = contextvars.ContextVar("rectizarr_tuning", default=None)


def current() -> Tuning:
    """The tuning in force in this context: the one :func:`use` set, else the process default."""
    return _active.get() or _default


def set_default(**changes: Any) -> Tuning:
    """Change fields of the process default (in force outside :func:`use` blocks); returns the new one."""
    global _default
    _default = replace(_default, **changes)
    return _default


@contextmanager
def use(tuning: Tuning) -> Iterator[Tuning]:
    """Run the ``with`` block (and the I/O work it starts) with ``tuning``."""
    token = _active.set(tuning)
    try:
        yield tuning
    finally:
        _active.reset(token)
