"""Documents and chunks that must be rejected (``conformance_data/invalid/``): exactly the recorded error
class, raised at the recorded stage, with a message naming what and where."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest

import rectizarr
from rectizarr import errors
from tests.conformance.corpus import invalid_cases

CASES = invalid_cases()


def test_invalid_corpus_is_present() -> None:
    assert len(CASES) >= 40
    stages = {exp["stage"] for _, exp in CASES}
    assert stages == {"open", "read"}


@pytest.mark.parametrize(("case_dir", "expected"), CASES, ids=[d.name for d, _ in CASES])
def test_invalid_is_rejected(case_dir: Path, expected: dict[str, Any]) -> None:
    cls = getattr(errors, expected["error"])
    store = case_dir / "data.zarr"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", errors.LenientMetadataWarning)
        if expected["stage"] == "open":
            with pytest.raises(errors.RectizarrError) as info:
                rectizarr.open_array(store, mode="r")
        else:
            arr = rectizarr.open_array(store, mode="r")
            with pytest.raises(errors.RectizarrError) as info:
                arr[...]
    exc = info.value
    assert type(exc) is cls, f"{case_dir.name}: raised {type(exc).__name__}: {exc}"
    message = str(exc)
    assert expected["message"] in message, message
    if expected["stage"] == "open":
        assert "zarr.json" in message, f"the message should name the document: {message}"
    if "json_path" in expected:
        assert isinstance(exc, errors.MetadataError)
        assert exc.path == expected["json_path"]
