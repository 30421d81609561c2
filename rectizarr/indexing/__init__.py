"""A user's selection -> a chunk plan, with NumPy's exact semantics: :mod:`.selection` (the entry points)
over :mod:`.plan` (orthogonal and coordinate plans) over :mod:`.axis` (one axis against a grid ``Dim``)."""

from rectizarr.indexing.axis import Dim
from rectizarr.indexing.plan import ChunkProjection, CoordinatePlan, OrthogonalPlan, Plan
from rectizarr.indexing.selection import (
    basic_plan,
    block_plan,
    block_region,
    coordinate_plan,
    orthogonal_plan,
)

__all__ = [
    "ChunkProjection",
    "CoordinatePlan",
    "Dim",
    "OrthogonalPlan",
    "Plan",
    "basic_plan",
    "block_plan",
    "block_region",
    "coordinate_plan",
    "orthogonal_plan",
]
