"""Codecs built from their metadata (:mod:`rectizarr.core.codec_meta`): the three kinds (:mod:`.array_to_array`,
:mod:`.array_to_bytes`, :mod:`.bytes_to_bytes`), chains and sharding (:mod:`.pipeline`), built by :mod:`.build`,
the shard format (:mod:`.shard_index`)."""
