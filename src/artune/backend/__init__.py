"""artune as a ``torch.distributed`` backend: ``dist.init_process_group("artune")``.

Installing artune registers the backend in every process through a
``torch.backends`` entry point (torch loads those at ``import torch``), and
``import artune`` registers it too once torch is imported; ``register()``
does it by hand. Every all-reduce of CPU tensors on the group then runs
through an ``artune.Communicator`` (the table's choice, agreement, the
self-check, faults and fallback as documented for it); every other
collective goes to an inner gloo group, and CUDA tensors to an inner NCCL
group. See ``artune.backend.process_group``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

BACKEND_NAME = "artune"

__all__ = ["BACKEND_NAME", "communicator", "register"]


def _create(store: Any, rank: int, size: int, timeout: timedelta) -> Any:
    from artune.backend.process_group import ArtuneProcessGroup

    return ArtuneProcessGroup(store, rank, size, timeout)


def register() -> None:
    """Register the ``artune`` backend with ``torch.distributed`` in this process; idempotent."""
    import torch.distributed as dist

    if not dist.is_available():
        return
    if BACKEND_NAME.upper() in dist.Backend._plugins:  # torch keys plugins by the upper-case name
        return
    # CUDA tensors are handled too (by an inner NCCL group), so say so rather than have torch guess
    dist.Backend.register_backend(BACKEND_NAME, _create, devices=["cpu", "cuda"])


def autoload() -> None:
    """The ``torch.backends`` entry point: runs at ``import torch`` in every process.

    A failure here would make ``import torch`` itself fail for every program,
    so it becomes a warning: ``init_process_group("artune")`` then fails with
    torch's "Unknown backend" and the warning says why.
    """
    try:
        register()
    except Exception as err:  # never break `import torch`
        import warnings

        warnings.warn(f"artune: could not register the 'artune' torch.distributed backend: {err}", stacklevel=2)


def communicator(group: Any = None) -> Any:
    """The ``artune.Communicator`` behind an artune process group (default: the default group).

    Use it for ``decide(...)``/``explain``-style questions about what the
    group's all-reduces run. Collective the first time (it builds the
    Communicator if no all-reduce has yet).
    """
    import torch.distributed as dist

    from artune.backend.process_group import ArtuneProcessGroup
    from artune.errors import ArtuneError

    pg = group if group is not None else dist.group.WORLD
    if not isinstance(pg, ArtuneProcessGroup):
        raise ArtuneError(
            f"communicator(): the group is not an artune process group (backend {dist.get_backend(pg)!r}); "
            "create it with init_process_group('artune') or new_group(backend='artune')"
        )
    return pg.communicator()
