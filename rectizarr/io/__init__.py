"""The I/O layer: the only one that knows both stores and codecs.

A read goes plan -> requests (keys, byte ranges) -> fetch -> decode -> paste; a write mirrors it. The
modules, top-down:

* :mod:`.engine` — :func:`read` and :func:`write`: pick the strategy for the layout;
* :mod:`.chunked`, :mod:`.sharded`, :mod:`.slabs`, :mod:`.sparse` — the strategies;
* :mod:`.chunk` — one chunk: decode, paste, merge; :mod:`.commit` — encode and store;
* :mod:`.layout` — :data:`Layout` (``ChunkedLayout | ShardedLayout``); :mod:`.cache` — shard indexes by
  version; :mod:`.pool` — threads and per-key locks; :mod:`.maintenance` — shrink and stored-chunk counts.

It asks stores and codec pipelines what they can do (``store.capabilities``, ``pipeline.is_raw`` ...)
and imports no concrete store class; its thresholds are in :mod:`rectizarr.tuning`.
"""

from rectizarr.io.cache import index_cache
from rectizarr.io.engine import read, write
from rectizarr.io.layout import ChunkedLayout, Layout, ShardedLayout, build_layout
from rectizarr.io.maintenance import delete_outside, nbytes_stored
from rectizarr.io.pool import set_workers
from rectizarr.io.sparse import stored_chunk_keys

__all__ = [
    "ChunkedLayout",
    "Layout",
    "ShardedLayout",
    "build_layout",
    "delete_outside",
    "index_cache",
    "nbytes_stored",
    "read",
    "set_workers",
    "stored_chunk_keys",
    "write",
]
