"""The I/O layer, the only one that knows both stores and codecs: a read goes plan -> requests (keys, byte
ranges) -> fetch -> decode -> paste, a write mirrors it. Top-down: :mod:`.engine` picks a strategy
(:mod:`.chunked`, :mod:`.sharded` with :mod:`.shards`, :mod:`.blocks`, :mod:`.sparse`), which ends in :mod:`.chunk`
(one chunk, and the commit); below them :mod:`.layout`, :mod:`.cache` and :mod:`.pool`. It asks stores and
codec pipelines what they can do and imports no concrete store class.

The read strategies, in the order :func:`.engine.read` tries them, with what forces each in tests: sparse
(:mod:`.sparse`; ``sparse_min_chunks=1``: test_capabilities, test_consistency), whole shards
(``batch.read_shards``: test_batch_props whole_shard_*, test_batch_engine_props), block batches
(:mod:`.blocks`; ``block_min_chunks=1``, ``batch_bytes``: test_raw_blocks, test_coded_blocks,
test_batch_engine_props), chunked, streamed or windowed (:mod:`.chunked`; ``block_min_chunks`` large:
test_batch_engine_props "per-chunk"), sharded (:mod:`.sharded`; ``piecewise_bytes=0``: test_local_transient,
test_batch_props)."""

from rectizarr.io.cache import index_cache as index_cache
from rectizarr.io.chunk import LayoutChanged as LayoutChanged
from rectizarr.io.clear import clear_appended as clear_appended
from rectizarr.io.clear import clear_past_end as clear_past_end
from rectizarr.io.clear import delete_outside as delete_outside
from rectizarr.io.engine import nbytes_stored as nbytes_stored
from rectizarr.io.engine import read as read
from rectizarr.io.engine import write as write
from rectizarr.io.layout import ChunkedLayout as ChunkedLayout
from rectizarr.io.layout import Layout as Layout
from rectizarr.io.layout import ShardedLayout as ShardedLayout
from rectizarr.io.layout import build_layout as build_layout
from rectizarr.io.pool import set_workers as set_workers
from rectizarr.io.sparse import stored_chunk_keys as stored_chunk_keys
