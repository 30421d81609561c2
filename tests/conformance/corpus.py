"""Discovery and comparison helpers for the conformance corpus in ``conformance_data/``."""

from __future__ import annotations

import base64
import json
import math
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2] / "conformance_data"
CASES = ROOT / "cases"
INVALID = ROOT / "invalid"


@dataclass(frozen=True)
class Case:
    dir: Path
    info: dict[str, Any]

    @property
    def id(self) -> str:
        return f"{self.dir.parent.name}/{self.dir.name}"

    @property
    def store(self) -> Path:
        return self.dir / "data.zarr"

    @property
    def arrays(self) -> list[dict[str, Any]]:
        """The arrays to check: ``path``, ``expected`` file, ``attributes``, ``dimension_names``."""
        if "arrays" in self.info:
            return list(self.info["arrays"])
        return [
            {
                "path": "",
                "expected": "expected.npy",
                "attributes": self.info.get("attributes", {}),
                "dimension_names": self.info.get("dimension_names"),
            }
        ]

    def expected(self, fname: str) -> Any:
        """The expected array; variable-length bytes come back as an object array of ``bytes``."""
        sidecar = self.dir / (fname[:-4] + ".bytes.json")
        if sidecar.exists():
            obj = json.loads(sidecar.read_text())
            items = [base64.b64decode(x) for x in obj["b64"]]
            out = np.empty(len(items), dtype=object)
            out[:] = items
            return out.reshape(obj["shape"])
        return np.load(self.dir / fname, allow_pickle=False)


def all_cases() -> list[Case]:
    return [
        Case(d, json.loads((d / "case.json").read_text()))
        for d in sorted(CASES.glob("*/*"))
        if (d / "case.json").exists()
    ]


def invalid_cases() -> list[tuple[Path, dict[str, Any]]]:
    return [
        (d, json.loads((d / "expected.json").read_text()))
        for d in sorted(INVALID.iterdir())
        if (d / "expected.json").exists()
    ]


def assert_same(actual: Any, expected: Any, *, view: str | None = None, what: str = "") -> None:
    """Bit-exact comparison (dtype, shape and bytes); variable-length values by equality."""
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    if (
        expected.dtype == object
        or actual.dtype == object
        or (expected.dtype.kind == "U" and actual.dtype.kind != "U")
    ):
        assert actual.ravel().tolist() == expected.ravel().tolist(), f"{what}: values differ"
        return
    if view is not None:
        actual = np.ascontiguousarray(actual).view(view)
    assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype} != {expected.dtype}"
    a = np.ascontiguousarray(actual).reshape(-1).view(np.uint8)
    e = np.ascontiguousarray(expected).reshape(-1).view(np.uint8)
    assert np.array_equal(a, e), f"{what}: bytes differ"


def same_json(a: Any, b: Any) -> bool:
    """JSON equality where NaN equals NaN (zarr-python writes NaN attributes)."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_json(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b, strict=True))
    return (bool(a == b) and type(a) is type(b)) or (
        isinstance(a, int | float) and isinstance(b, int | float) and not isinstance(a, bool) and a == b
    )


def selections(shape: tuple[int, ...], name: str) -> list[tuple[str, Any]]:
    """Deterministic selections of every kind for ``shape`` as ``(kind, selection)``; kind is ``basic``,
    ``oindex``, ``vindex`` or ``mask``. The same selection applied to the numpy expected array is the oracle."""
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    nd = len(shape)
    out: list[tuple[str, Any]] = [("basic", ...)]
    if nd == 0:
        return [*out, ("basic", ())]
    out.append(("basic", tuple(slice(None, None, -1) for _ in shape)))
    out.append(
        ("basic", tuple(slice(None, None, -2) if i % 2 == 0 else slice(None, None, 3) for i in range(nd)))
    )
    out.append(("basic", tuple(slice(max(n - 2, 0), 0, -3) if n else slice(None) for n in shape)))
    if all(n > 0 for n in shape):
        out.append(("basic", tuple(-1 if i == 0 else slice(1, None) for i in range(nd))))
        out.append(("basic", tuple(int(rng.integers(0, n)) for n in shape)))
        out.append(("oindex", tuple(rng.integers(-n, n, size=min(n + 1, 5)) for n in shape)))
        out.append(
            (
                "oindex",
                tuple(
                    slice(None, None, -1) if i % 2 else np.array(sorted(rng.integers(0, n, 3)))
                    for i, n in enumerate(shape)
                ),
            )
        )
        pts = 6
        out.append(("vindex", tuple(rng.integers(0, n, size=pts) for n in shape)))
        out.append(("vindex", tuple(rng.integers(-n, n, size=(2, 3)) for n in shape)))
    out.append(("mask", rng.random(shape) < 0.4))
    return out


def apply_numpy(expected: np.ndarray, kind: str, sel: Any) -> np.ndarray:
    if kind == "oindex":  # orthogonal: one axis at a time
        result = expected
        for axis, s in enumerate(sel):
            result = (
                np.take(result, s, axis=axis)
                if isinstance(s, np.ndarray)
                else result[(slice(None),) * axis + (s,)]
            )
        return result
    return np.asarray(expected[sel])


def apply_array(arr: Any, kind: str, sel: Any) -> Any:
    if kind == "basic":
        return arr[sel]
    if kind == "oindex":
        return arr.oindex[sel]
    if kind == "vindex":
        return arr.vindex[sel]
    return arr.get_mask_selection(sel)


V2_ROOT = ROOT / "v2"


def v2_cases() -> list[Case]:
    """The stored Zarr v2 cases (``conformance_data/v2/<producer>/<case>``)."""
    return [
        Case(d, json.loads((d / "case.json").read_text()))
        for d in sorted(V2_ROOT.glob("*/*"))
        if (d / "case.json").exists()
    ]


def _value(x: Any) -> Any:
    if isinstance(x, dict) and set(x) == {"b64"}:
        return base64.b64decode(x["b64"])
    if isinstance(x, dict) and set(x) == {"array", "dtype"}:
        return np.array(x["array"], dtype=x["dtype"])
    return x


def expected_v2(case: Case, fname: str) -> np.ndarray:
    """What the producer of a v2 case read back, from its ``.npy`` or ``.json`` file ``fname``."""
    if fname.endswith(".json"):
        obj = json.loads((case.dir / fname).read_text())
        out = np.empty(len(obj["values"]), dtype=object)
        for i, v in enumerate(obj["values"]):
            out[i] = _value(v)
        return out.reshape(obj["shape"])
    return np.load(case.dir / fname, allow_pickle=False)


def same_v2(got: Any, want: np.ndarray, what: str) -> None:
    """``got`` holds the values of ``want`` bit for bit (object arrays: value by value)."""
    got = np.asarray(got)
    if got.dtype.type.__module__.startswith("ml_dtypes"):  # stored as raw bits (no .npy form)
        got = got.view(f"u{got.dtype.itemsize}")
    if want.dtype.hasobject:
        assert got.shape == want.shape, what
        for g, w in zip(got.reshape(-1), want.reshape(-1), strict=True):
            if isinstance(w, np.ndarray):
                assert isinstance(g, np.ndarray) and g.dtype == w.dtype and np.array_equal(g, w), what
            else:
                assert type(g) is type(w) and g == w, what
        return
    # rectizarr holds values in native byte order; the bits of the values are what must match
    assert_same(
        got,
        want.astype(want.dtype.newbyteorder("=")) if want.dtype.fields is None else want.astype(got.dtype),
        what=what,
    )
