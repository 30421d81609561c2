"""The I/O layer: the only one that knows both stores and codecs."""
