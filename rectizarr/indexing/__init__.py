"""A user's selection -> a chunk plan, with NumPy's exact semantics: :mod:`.selection` (the entry points)
over :mod:`.plan` (orthogonal and coordinate plans) over :mod:`.axis` (one axis against a grid ``Dim``)."""

from rectizarr.indexing.axis import Dim as Dim
from rectizarr.indexing.plan import ChunkProjection as ChunkProjection
from rectizarr.indexing.plan import CoordinatePlan as CoordinatePlan
from rectizarr.indexing.plan import OrthogonalPlan as OrthogonalPlan
from rectizarr.indexing.plan import Plan as Plan
from rectizarr.indexing.selection import basic_plan as basic_plan
from rectizarr.indexing.selection import block_plan as block_plan
from rectizarr.indexing.selection import block_region as block_region
from rectizarr.indexing.selection import coordinate_plan as coordinate_plan
from rectizarr.indexing.selection import orthogonal_plan as orthogonal_plan
