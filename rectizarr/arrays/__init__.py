"""Arrays: the user-facing :class:`Array` (:mod:`.array`), built on the handle's state (:mod:`.base`), its reads,
writes and document updates (:mod:`.access`) and resizing (:mod:`.resize`)."""

from rectizarr.arrays.array import Array, StagedTarget, create
from rectizarr.arrays.resize import resize_together

__all__ = ["Array", "StagedTarget", "create", "resize_together"]
