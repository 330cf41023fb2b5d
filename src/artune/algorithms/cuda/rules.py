"""When torch symmetric-memory all-reduces can run: pure rules over facts, tested on CPU with faked facts.

Facts come from the installed torch and the device (``SymmMemFacts.probe``
reads them on a GPU host). Every rule returns the reason an algorithm cannot
run, or ``None``. The constraints are those of ``torch.ops.symm_mem`` (its
op schemas and CUDA kernels, torch 2.5 on): bf16 and fp32, ``sum`` only, input in a
symmetric buffer, byte size a multiple of ``max(4, element size)``, CUDA
runtime 12.3 or later, multimem only where NVLink multicast (NVLS) works.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

#: catalog name -> the ``torch.ops.symm_mem`` ops it can use, preferred first (any one suffices)
OPS: dict[str, tuple[str, ...]] = {
    "symm_mem_one_shot": ("one_shot_all_reduce_out", "one_shot_all_reduce"),
    "symm_mem_two_shot": ("two_shot_all_reduce_",),
    "symm_mem_multimem": ("multimem_all_reduce_",),
}
DTYPES = (torch.bfloat16, torch.float32)
MIN_CUDA = (12, 3)
MIN_CAPABILITY = (8, 0)  # the one- and two-shot kernels; multimem needs Hopper's multimem instructions
MIN_CAPABILITY_MULTIMEM = (9, 0)


@dataclass(frozen=True)
class SymmMemFacts:
    """What decides whether the symmetric-memory algorithms can be opened (identical on every rank)."""

    module: str  # "" when torch.distributed._symmetric_memory imports, else why not
    ops: frozenset[str]  # the ops of torch.ops.symm_mem present in this torch
    cuda_runtime: str  # torch.version.cuda ("" on a CPU build)
    capability: tuple[int, int]  # of the current device
    world_size: int
    same_host: bool
    peer_access: str  # gpufacts.peer_summary of the local GPUs

    @classmethod
    def probe(cls, world_size: int, same_host: bool) -> SymmMemFacts:
        """Read the facts here (needs CUDA)."""
        from artune.gpufacts import peer_summary

        try:
            import torch.distributed._symmetric_memory

            module = ""
        except ImportError as err:
            module = f"torch.distributed._symmetric_memory does not import ({err})"
        namespace = getattr(torch.ops, "symm_mem", None)
        present = frozenset(
            op for ops in OPS.values() for op in ops if namespace is not None and _has_op(namespace, op)
        )
        count = torch.cuda.device_count()
        access = [[i == j or torch.cuda.can_device_access_peer(i, j) for j in range(count)] for i in range(count)]
        return cls(
            module=module,
            ops=present,
            cuda_runtime=str(torch.version.cuda or ""),
            capability=tuple(torch.cuda.get_device_capability()),  # type: ignore[arg-type]
            world_size=world_size,
            same_host=same_host,
            peer_access=peer_summary(access),
        )


def _has_op(namespace: object, op: str) -> bool:
    try:
        return hasattr(namespace, op)
    except Exception:  # torch.ops raises for unknown ops in some versions
        return False


def _version(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(p) for p in text.split(".")[:2])
    except ValueError:
        return ()


def open_unavailable(name: str, facts: SymmMemFacts) -> str | None:
    """Why algorithm ``name`` cannot be opened with these facts (before any buffer exists), or ``None``."""
    if facts.module:
        return facts.module
    wanted = OPS[name]
    if not any(op in facts.ops for op in wanted):
        return f"torch.ops.symm_mem.{wanted[0]} is not in this torch ({torch.__version__})"
    runtime = _version(facts.cuda_runtime)
    if not runtime:
        return "this torch is not built with CUDA"
    if runtime < MIN_CUDA:
        return f"needs CUDA runtime >= {MIN_CUDA[0]}.{MIN_CUDA[1]}, torch has {facts.cuda_runtime}"
    least = MIN_CAPABILITY_MULTIMEM if name == "symm_mem_multimem" else MIN_CAPABILITY
    if facts.capability < least:
        cap = ".".join(map(str, facts.capability))
        return f"needs compute capability >= {least[0]}.{least[1]}, the device is {cap}"
    if not facts.same_host:
        return "ranks are on different hosts (symmetric memory needs one NVLink domain)"
    if facts.world_size > 1 and facts.peer_access != "all":
        return f"peer access between the local GPUs is {facts.peer_access!r}, not all"
    return None


def multicast_unavailable(name: str, multicast: bool) -> str | None:
    """After the rendezvous: multimem needs a multicast address (``handle.multicast_ptr != 0``)."""
    if name == "symm_mem_multimem" and not multicast:
        return "NVLink multicast (NVLS) is not available here (the rendezvous gave no multicast address)"
    return None


def call_unavailable(dtype: torch.dtype, op: str) -> str | None:
    """Why a dtype or op cannot be reduced (size-independent, the same on every rank)."""
    if op != "sum":
        return f"op {op!r} is not supported (torch.ops.symm_mem reduces with 'sum' only)"
    if dtype not in DTYPES:
        return f"dtype {dtype} is not supported (bfloat16 and float32 only)"
    return None


def size_unfit(nbytes: int, itemsize: int, buffer_bytes: int) -> str | None:
    """Why a message of ``nbytes`` cannot go through the symmetric buffer, or ``None``."""
    align = max(4, itemsize)
    if nbytes % align:
        return f"{nbytes} bytes is not a multiple of {align} (the kernels' alignment)"
    if nbytes > buffer_bytes:
        return f"{nbytes} bytes is larger than the symmetric buffer ({buffer_bytes} bytes)"
    return None
