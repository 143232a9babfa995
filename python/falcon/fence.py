"""Storage fencing of managed workloads (docs/self-healing.md#storage-fencing).

A copy of a managed workload started by ``falcon serve`` with ``supervisor.fence`` set carries
``FALCON_FENCE_URI`` and ``FALCON_FENCE_EPOCH`` in its environment. Before each checkpoint
write it calls :func:`check`, which raises :class:`falcon.FencedError` once a newer copy was
started (wherever it runs, even where no control plane can see this one)::

    import falcon

    for step in range(steps):
        train_step()
        if step % 1000 == 0:
            falcon.fence.check()   # raises FencedError: a newer copy owns the checkpoint
            save_checkpoint()
"""

from typing import Optional

from . import _falcon
from ._errors import FencedError

__all__ = ["check", "FencedError"]


def check(uri: Optional[str] = None, epoch: Optional[int] = None) -> int:
    """Reads the fence object and returns the epoch it holds when it is not newer than this
    copy's; raises FencedError when it is. ``uri`` and ``epoch`` default to the environment's
    FALCON_FENCE_URI and FALCON_FENCE_EPOCH; without either (the copy was started without a
    fence) nothing is read and 0 is returned. Raises LogRetrievalError when the object cannot be
    read (a copy that cannot check should not write either), ValueError for a bad uri or
    epoch. Credentials and endpoints as for log reads (Application Default Credentials,
    STORAGE_EMULATOR_HOST)."""
    return int(_falcon.check_fence(uri, epoch))
