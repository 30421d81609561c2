"""Virtual concatenation against numpy.concatenate: random ranks, axes, lengths, chunkings and layouts
(raw, compressed, sharded, Zarr v2; missing chunks), read back by rectizarr and zarr-python."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import given

import rectizarr
from rectizarr import virtual
from tests.refs import zarr_python
from tests.strategies import concat_cases, examples


def _bits(a: Any) -> tuple[tuple[int, ...], str, bytes]:
    """Shape, kind and native-order bytes: equal values, bit for bit (NaN payloads and -0.0 included)."""
    x = np.asarray(a)
    native = x.astype(x.dtype.newbyteorder("="))
    return x.shape, native.dtype.str, native.tobytes()


def _sources(root: Path, case: dict[str, Any]) -> tuple[list[str], list[np.ndarray]]:
    rng = np.random.default_rng(case["seed"])
    axis, kwargs = case["axis"], case["kwargs"]
    paths, values = [], []
    for i, (n, partial) in enumerate(zip(case["lengths"], case["partial"], strict=True)):
        shape = tuple(n if ax == axis else e for ax, e in enumerate(case["other"]))
        x = np.full(shape, kwargs["fill_value"], dtype=case["dtype"])
        cut = tuple(
            slice(0, (n + 1) // 2 if partial else n) if ax == axis else slice(None)
            for ax in range(len(shape))
        )
        x[cut] = rng.integers(0, 100, x[cut].shape)
        path = str(root / f"s{i}")
        a = rectizarr.create_array(path, shape=shape, dtype=case["dtype"], **kwargs)
        if x[cut].size:
            a[cut] = x[cut]
        paths.append(path)
        values.append(x)
    return paths, values


@examples(0.6)
@given(concat_cases())
def test_virtual_concat_equals_numpy_concatenate(case: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        paths, values = _sources(root, case)
        result = virtual.build(paths, case["axis"], side_store=root / "side")
        expected = np.concatenate(values, axis=case["axis"])
        got = rectizarr.open_array("reference://", mode="r", storage_options={"fo": result.refs})
        assert got.shape == expected.shape and got.dtype == expected.dtype
        assert _bits(got[...]) == _bits(expected)
        # only the sources' last chunks along the axis (not the very last one) are ever rewritten
        others = int(
            np.prod(
                [
                    -(-e // c)
                    for ax, (e, c) in enumerate(zip(case["other"], case["kwargs"]["chunks"], strict=True))
                    if ax != case["axis"]
                ]
            )
        )
        assert result.rewritten + result.prefixes <= others * (len(paths) - 1)
        zarr = zarr_python()
        with zarr.config.set({"array.rectilinear_chunks": True}):
            z = zarr.open_array("reference://", mode="r", storage_options={"fo": result.refs})
            assert _bits(z[...]) == _bits(expected)


@examples(0.4)
@given(concat_cases())
def test_appending_one_source_at_a_time_equals_one_join(case: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        paths, values = _sources(root, case)
        refs = virtual.concat(paths[:1], case["axis"], side_store=root / "side")
        for p in paths[1:]:  # each step reads the previous reference set as its first source
            refs = virtual.concat([refs, p], case["axis"], side_store=root / "side")
        got = rectizarr.open_array(refs, mode="r")
        assert _bits(got[...]) == _bits(np.concatenate(values, axis=case["axis"]))
        once = virtual.concat(paths, case["axis"], side_store=root / "side")
        assert got.metadata.chunk_grid == rectizarr.open_array(once, mode="r").metadata.chunk_grid
