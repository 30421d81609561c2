"""Indexing: a user's selection -> a chunk plan, with NumPy's exact semantics.

:mod:`.axis` resolves one axis of a selection against a grid dimension, :mod:`.plan` combines the axes
into a :class:`Plan` (orthogonal or coordinate), and :mod:`.selection` holds the four entry points.
Only the :class:`~rectizarr.indexing.axis.Dim` protocol of a grid is seen here.
"""

from rectizarr.indexing.plan import ChunkProjection, CoordinatePlan, OrthogonalPlan, Plan
from rectizarr.indexing.selection import Dim, basic_plan, block_plan, coordinate_plan, orthogonal_plan

__all__ = [
    "ChunkProjection",
    "CoordinatePlan",
    "Dim",
    "OrthogonalPlan",
    "Plan",
    "basic_plan",
    "block_plan",
    "coordinate_plan",
    "orthogonal_plan",
]
