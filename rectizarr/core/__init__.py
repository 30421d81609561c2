"""Values and their JSON: data types, fill values, chunk grids, chunk keys, codec and node metadata.

No I/O and no threads here; everything is built from (and validated against) ``zarr.json`` documents."""
