"""The names of Zarr v2's documents (no import cost: what looks for a v2 node needs no more of v2)."""

V2_ARRAY, V2_GROUP, V2_ATTRS, V2_CONSOLIDATED = ".zarray", ".zgroup", ".zattrs", ".zmetadata"
V2_KEYS = (V2_ARRAY, V2_GROUP, V2_ATTRS)
DIMS_ATTR = "_ARRAY_DIMENSIONS"  # the attribute of xarray's dimension names
