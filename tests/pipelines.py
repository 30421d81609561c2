"""Codec pipelines for the codec property tests (tests/property/test_codec_props.py, test_batch_props.py):
``build`` one from a chain's JSON for a chunk spec, and ``same``: bit-exact equality of decoded chunks."""

from __future__ import annotations

from typing import Any

import numpy as np

from rectizarr.codecs.base import ChunkSpec
from rectizarr.codecs.build import build_pipeline
from rectizarr.codecs.pipeline import CodecPipeline
from rectizarr.core.codec_meta import parse_codecs


def same(a: np.ndarray, b: np.ndarray) -> bool:
    if a.dtype.hasobject:
        return a.shape == b.shape and a.tolist() == b.tolist()
    return a.shape == b.shape and a.dtype == b.dtype and np.ascontiguousarray(a).tobytes() == b.tobytes()


def build(codecs: list[dict[str, Any]], s: ChunkSpec) -> CodecPipeline:
    return build_pipeline(parse_codecs(codecs), s.dtype, [np.array([e]) for e in s.shape])
