"""The names the I/O layer imports from here: the sharding codec is in :mod:`.pipeline` (it nests codec
chains), the shard format's data in :mod:`.shard_index`. Import from those; this module goes once
``rectizarr.io`` does."""

from rectizarr.codecs.pipeline import ShardingCodec
from rectizarr.codecs.shard_index import ShardIndex, ShardIndexCache, is_fill

__all__ = ["ShardIndex", "ShardIndexCache", "ShardingCodec", "is_fill"]
