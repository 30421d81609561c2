"""The I/O layer, the only one that knows both stores and codecs: a read goes plan -> requests (keys, byte
ranges) -> fetch -> decode -> paste, a write mirrors it. Top-down: :mod:`.engine` picks a strategy
(:mod:`.chunked`, :mod:`.sharded` with :mod:`.shards`, :mod:`.blocks`, :mod:`.sparse`), which ends in :mod:`.chunk` (one chunk,
and the commit); below them :mod:`.layout`, :mod:`.cache` and :mod:`.pool`. It asks stores and codec
pipelines what they can do and imports no concrete store class."""

from rectizarr.io.cache import index_cache
from rectizarr.io.chunk import LayoutChanged
from rectizarr.io.engine import delete_outside, each_cleared, nbytes_stored, read, write
from rectizarr.io.layout import ChunkedLayout, Layout, ShardedLayout, build_layout
from rectizarr.io.pool import set_workers
from rectizarr.io.sparse import stored_chunk_keys

__all__ = [
    "ChunkedLayout",
    "Layout",
    "LayoutChanged",
    "ShardedLayout",
    "build_layout",
    "delete_outside",
    "each_cleared",
    "index_cache",
    "nbytes_stored",
    "read",
    "set_workers",
    "stored_chunk_keys",
    "write",
]
