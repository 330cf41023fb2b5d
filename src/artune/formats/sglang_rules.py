"""How SGLang decides, as its released code does: the rules of every ``sglang:`` and ``reference:sglang`` table.

SGLang has no fallback between arches and no nearest world size: custom
all-reduce v2 is disabled at a world size its configs do not list
(``can_use_custom_all_reduce_v2``), and the communicator runs NCCL there
(its legacy ``CustomAllreduce`` takes only 2, 4, 6 and 8 ranks, which v2
always takes). An arch without configs of its own gets what SGLang's
dispatch on ``torch.cuda.get_device_capability()`` gives it.

A release's own code says the rest, and ``artune.formats.sglang_dispatch``
reads it there: the order of algorithms, the world sizes, the sizing. What
lives here is what that reading stands in for, each with its source:

- the machine it answers for (``fakes``): one host whose GPUs all see each
  other over NVLink, every environment variable at its default;
- what ``__init__`` does after it starts allocating the workspace
  (``after_init``), and ``_init_workspace``'s multicast switch;
- ``ALIGN``: ``should_custom_ar`` takes only sizes that are multiples of 16
  bytes (the catalog's alignment rule for SGLang's algorithms);
- for ``reference:sglang``, which has no file to read, SGLang 0.5.23's
  sizing and arch dispatch written out (``workspace``, ``clip``,
  ``arch_table``); tests hold them equal to the release as read.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from artune.formats.pyeval import Namespace, Native, Symbol
from artune.table.rules import Rules

RULES = Rules(
    "sglang",
    "SGLang",
    nearest=False,
    fallback="nccl",
    no_plan="SGLang has no custom all-reduce v2 config for world size {world_size} (hosts={hosts}): "
    "it is disabled there and every size goes to nccl",
)

KB = 1024
MB = 1024 * KB
WORLD_SIZES = tuple(range(2, 17))  # the world sizes asked: SGLang's configs go up to 16 ranks
ALIGN = 16  # should_custom_ar: "custom allreduce requires input byte size to be multiples of 16"
# environ.py's defaults for what the communicator reads, where a checkout gives no environ.py
ENV_DEFAULTS: Mapping[str, Any] = MappingProxyType(
    {
        "SGLANG_CUSTOM_ALL_REDUCE_V2_MAX_SIZE_KB": 16 * 1024,
        "SGLANG_FORCE_CUSTOM_ALL_REDUCE_V2_PULL_SIZE_KB": None,
        "SGLANG_FORCE_CUSTOM_ALL_REDUCE_V2_PUSH_SIZE_KB": None,
        "SGLANG_MEMORY_SAVER_CUDA_GRAPH": False,
        "SGLANG_ENABLE_CUSTOM_ALL_REDUCE_V2_MULTINODE": False,
        "SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2": True,
    }
)
WORKSPACE_ENV = "SGLANG_CUSTOM_ALL_REDUCE_V2_MAX_SIZE_KB"
DEFAULT_BLOCKS = "default"  # 0.5.10-0.5.15 configs name no grid: the kernel picks its own

# probed GPUs: (major, minor) and the SM count given (None: the symbol ``sms``); 132 for 9.x as tuned on H200,
# 148 for 10.0 and 10.3 as tuned on B200; the default is asked on an arch no release names
PROBES: tuple[tuple[tuple[int, int], int | None], ...] = (
    ((9, 0), 132),
    ((10, 0), 148),
    ((10, 3), 148),
    ((10, 7), None),
    ((12, 0), None),
)
DEFAULT_PROBE: tuple[tuple[int, int], int | None] = ((8, 0), None)


def fakes(cap: tuple[int, int], num_sm: int | None, state: Any, envs: Namespace) -> dict[str, Any]:
    """What the names from outside SGLang's files answer: the GPU ``cap``, one host with full NVLink.

    ``state.world_size`` is the group's size and ``state.graph`` whether a
    CUDA graph is being captured, for the call in progress.
    """
    sms: Any = num_sm if num_sm is not None else Symbol("sms")
    props = MappingProxyType({"multi_processor_count": sms, "major": cap[0], "minor": cap[1]})

    def nvlink(*_args: Any, supported_world_size: Any = (), **_kwargs: Any) -> bool | None:
        # custom_all_reduce_utils.can_use_custom_all_reduce_with_nvlink on one host with full NVLink and
        # peer access: None (disabled) for a world size outside the list, True otherwise
        return True if state.world_size in supported_world_size else None

    def replace(record: Any, **changes: Any) -> Any:  # dataclasses.replace on the file's records
        return record.replace([], changes)

    return {
        "torch.cuda.get_device_capability": lambda *a: cap,
        "torch.cuda.get_device_properties": lambda *a: props,
        "torch.cuda.current_device": lambda: 0,
        "torch.cuda.is_available": lambda: True,
        "torch.cuda.is_current_stream_capturing": Native(lambda: state.graph, "torch.cuda.is_current_stream_capturing"),
        # sglang/srt/utils/common.py: the capability's major is 10 (9) and CUDA is new enough, as it is on any
        # Blackwell (Hopper) machine SGLang runs on
        "is_sm100_supported": lambda *a: cap[0] == 10,
        "is_sm90_supported": lambda *a: cap[0] == 9,
        "torch.distributed.get_rank": Native(lambda *a, **k: 0, "dist.get_rank"),
        "torch.distributed.get_world_size": Native(lambda *a, **k: state.world_size, "dist.get_world_size"),
        "can_use_custom_all_reduce_with_nvlink": Native(nvlink, "can_use_custom_all_reduce_with_nvlink"),
        "in_the_same_node_as": Native(lambda *a, **k: [True] * state.world_size, "in_the_same_node_as"),
        "is_weak_contiguous": Native(lambda *a: True, "is_weak_contiguous"),
        "is_in_tc_piecewise_cuda_graph": Native(lambda: False, "is_in_tc_piecewise_cuda_graph"),
        "is_in_piecewise_cuda_graph": Native(lambda: False, "is_in_piecewise_cuda_graph"),
        "get_all_reduce_module": Native(lambda *a: Symbol("all_reduce_module"), "get_all_reduce_module"),
        "dataclasses.replace": Native(replace, "dataclasses.replace"),
        "envs": envs,
    }


def after_init(init: ast.FunctionDef, stop: int | None, me: Namespace) -> None:
    """What ``CustomAllReduceV2.__init__`` sets after ``stop`` (where it starts allocating the workspace) that
    the dispatch reads: its closing ``self.disabled = False``. (``_init_workspace``'s multicast switch is
    ``sglang_dispatch._no_multicast``.)"""
    for stmt in init.body:
        if stop is not None and stmt.lineno < stop:
            continue
        if (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and ast.unparse(stmt.targets[0]) == "self.disabled"
            and isinstance(stmt.value, ast.Constant)
        ):
            me.values["disabled"] = stmt.value.value


def workspace_bytes(env: Mapping[str, Any]) -> int:
    """The default workspace cap: ``SGLANG_CUSTOM_ALL_REDUCE_V2_MAX_SIZE_KB`` KiB (16 MiB)."""
    return int(env.get(WORKSPACE_ENV, ENV_DEFAULTS[WORKSPACE_ENV])) * KB
