"""How SGLang decides, as its released code does: the rules of every ``sglang:`` and ``reference:sglang`` table.

SGLang has no fallback between arches and no nearest world size: custom
all-reduce v2 is disabled at a world size its configs do not list
(``can_use_custom_all_reduce_v2``), and the communicator runs NCCL there
(its legacy ``CustomAllreduce`` takes only 2, 4, 6 and 8 ranks, which v2
always takes). An arch without configs of its own gets what SGLang's
dispatch on ``torch.cuda.get_device_capability()`` gives it.

A release's own code says the rest, and ``artune.formats.sglang.dispatch``
reads it there: the order of algorithms, the world sizes, the sizing. What
lives here is what that reading stands in for, each with its source:

- the machine it answers for (``fakes``): CUDA; one host whose GPUs all see
  each other over NVLink (or, ``state.nvlink`` false, over PCIe only), every
  environment variable at its default unless ``settings`` sets it; or,
  across hosts (``state.hosts`` > 1), hosts that are one NVLink clique (a
  rack, ``state.rack``: ``is_one_nvlink_clique`` true, and the caching
  allocator VMM-backed, as ``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True``
  makes it; SGLang does not set that itself) or are joined over a network (no
  clique);
- the environment: ``envs.NAME.get()`` as ``environ.py``'s defaults answer it,
  or as a setting given (``env_defaults``, ``Env``), parsed as SGLang's
  ``Env...`` fields parse it;
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
import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

from artune.catalog import SPECS
from artune.errors import TableError, Unsupported
from artune.formats.files import SourceFile
from artune.formats.pyeval import Interpreter, Namespace, Native, Symbol, parse
from artune.formats.pyeval.expressions import Evaluator
from artune.formats.pyeval.values import Scope
from artune.table.priority import SizeRule, upto
from artune.table.types import Band

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


NO_SETTINGS: Mapping[str, str] = MappingProxyType({})
OPS = "sglang.srt.distributed.device_communicators.custom_all_reduce_ops"
_LOG = ("debug", "info", "warning", "error")


def env_defaults(environ: SourceFile | None, settings: Mapping[str, str] = NO_SETTINGS) -> dict[str, Any]:
    """``SGLANG_...`` -> what ``envs.NAME.get()`` answers: the default ``environ.py`` gives it
    (``NAME = EnvInt(16 * 1024)``), or the value ``settings`` sets, parsed as its field parses it; without the
    file, the defaults of the variables the communicator reads (``artune.formats.sglang.ENV_DEFAULTS``)."""
    if environ is None:
        out = dict(ENV_DEFAULTS)
        out.update({name: _parse_setting("", name, text) for name, text in settings.items() if name in out})
        return out
    out = {}
    evaluator = Evaluator(environ.path, restricted=True)
    for stmt in parse(environ.text, environ.path).body:
        if not (isinstance(stmt, ast.ClassDef) and stmt.name == "Envs"):
            continue
        for item in stmt.body:
            if not (isinstance(item, ast.Assign) and isinstance(item.value, ast.Call)):
                continue
            call = item.value
            if not (isinstance(call.func, ast.Name) and call.func.id.startswith("Env")):
                continue
            node = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "default"), None)
            if node is None:
                continue
            try:
                value = evaluator.eval(node, Scope({}))
            except Unsupported:
                continue  # a computed default (a callable): not one the communicator reads
            for target in item.targets:
                if isinstance(target, ast.Name):
                    name = target.id
                    out[name] = _parse_setting(call.func.id, name, settings[name]) if name in settings else value
    return out


def _parse_setting(kind: str, name: str, text: str) -> Any:
    """``text`` as SGLang's ``Env...`` field of that kind parses it (``EnvBool``: "1", "true", "yes", "y" ...)."""
    if "Bool" in kind or (not kind and isinstance(ENV_DEFAULTS.get(name), bool)):
        lowered = text.lower()
        if lowered in ("true", "1", "yes", "y"):
            return True
        if lowered in ("false", "0", "no", "n"):
            return False
        raise TableError(f"{name}={text!r}: not a boolean SGLang reads (1, true, yes, y, 0, false, no, n)")
    if "Int" in kind or (not kind and isinstance(ENV_DEFAULTS.get(name), int)):
        try:
            return int(text)
        except ValueError:
            raise TableError(f"{name}={text!r}: not an integer") from None
    return text


class Env(Namespace):
    """``envs``: each ``envs.NAME.get()`` answers its value (the default, where the variable is unset), and
    ``envs.NAME.is_set()`` whether the user set it (``settings``); each name asked is noted in ``asked``."""

    def __init__(
        self, defaults: dict[str, Any], settings: Mapping[str, str] = NO_SETTINGS, asked: set[str] | None = None
    ) -> None:
        super().__init__("sglang.srt.environ.envs")
        self.defaults = defaults
        self.settings = settings
        self.asked = asked if asked is not None else set()

    def attribute(self, name: str) -> tuple[bool, Any]:
        self.asked.add(name)
        if name not in self.defaults:
            return False, None
        value, given = self.defaults[name], name in self.settings
        get = Native(lambda: value, f"envs.{name}.get")
        return True, Namespace(f"envs.{name}", {"get": get, "is_set": Native(lambda: given, f"envs.{name}.is_set")})


def fakes(
    cap: tuple[int, int], num_sm: int | None, state: Any, envs: Namespace, settings: Mapping[str, str] = NO_SETTINGS
) -> dict[str, Any]:
    """What the names from outside SGLang's files answer: the GPU ``cap``, CUDA, the machine ``state`` says.

    ``state.world_size`` is the group's size and ``state.graph`` whether a
    CUDA graph is being captured, for the call in progress; ``state.hosts``,
    ``state.rack`` and ``state.nvlink`` the machine. ``settings``: the
    environment variables set, as a user sets them (``get_bool_env_var``).
    """
    sms: Any = num_sm if num_sm is not None else Symbol("sms")
    props = MappingProxyType({"multi_processor_count": sms, "major": cap[0], "minor": cap[1]})

    def nvlink(*_args: Any, supported_world_size: Any = (), **_kwargs: Any) -> bool | None:
        # custom_all_reduce_utils.can_use_custom_all_reduce_with_nvlink, peer access working: None (disabled)
        # across nodes ("No need to initialize custom allreduce for multi-node case") and for a world size
        # outside the list; without NVLink between every pair, None above two GPUs ("not supported on more than
        # two PCIe-only GPUs") and False (full_nvlink) at two; True with NVLink everywhere
        if state.world_size not in supported_world_size or state.hosts > 1:
            return None
        if state.world_size > 2 and not state.nvlink:
            return None
        return bool(state.nvlink)

    logger = {name: Native(lambda *a, **k: None, f"logger.{name}") for name in _LOG}

    def bool_env(name: str, default: str = "false") -> bool:
        # sglang/srt/utils/common.py get_bool_env_var: the variable, or the default, is "true" or "1"
        if isinstance(envs, Env):
            envs.asked.add(name)
        return str(settings.get(name, default)).lower() in ("true", "1")

    def same_node(*_args: Any, **_kwargs: Any) -> list[bool]:
        # parallel_state.in_the_same_node_as(group, source_rank=0): the ranks on rank 0's host
        per_host = state.world_size // state.hosts
        return [rank < per_host for rank in range(state.world_size)]

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
        "in_the_same_node_as": Native(same_node, "in_the_same_node_as"),
        # custom_all_reduce_utils.is_one_nvlink_clique: every GPU in one fabric clique (one NVL72 domain)
        "is_one_nvlink_clique": Native(lambda *a, **k: state.rack, "is_one_nvlink_clique"),
        # custom_all_reduce_v2._is_vmm_backed_allocator: expandable segments, as a rack is read (see above)
        "_is_vmm_backed_allocator": Native(lambda *a, **k: state.rack, "_is_vmm_backed_allocator"),
        "is_weak_contiguous": Native(lambda *a: True, "is_weak_contiguous"),
        "is_in_tc_piecewise_cuda_graph": Native(lambda: False, "is_in_tc_piecewise_cuda_graph"),
        "is_in_piecewise_cuda_graph": Native(lambda: False, "is_in_piecewise_cuda_graph"),
        "get_all_reduce_module": Native(lambda *a: Symbol("all_reduce_module"), "get_all_reduce_module"),
        "dataclasses.replace": Native(replace, "dataclasses.replace"),
        "envs": envs,
        # sglang/srt/utils: the platform is CUDA
        "is_cuda": Native(lambda: True, "is_cuda"),
        "is_hip": Native(lambda: False, "is_hip"),
        "is_musa": Native(lambda: False, "is_musa"),
        "get_bool_env_var": Native(bool_env, "get_bool_env_var"),
        # custom_all_reduce_ops on CUDA: sgl_kernel's custom all-reduce is built in
        f"{OPS}.IS_CUSTOM_AR_AVAILABLE": True,
        # what the communicators log changes nothing they decide
        "logging.getLogger": Native(lambda *a: Namespace("logging.Logger", dict(logger)), "logging.getLogger"),
        "log_info_on_rank0": Native(lambda *a, **k: None, "log_info_on_rank0"),
    }


def lifted(
    source: SourceFile, fakes: dict[str, Any], unmodelled: Any, module: str, objects: bool = False
) -> Interpreter:
    """An interpreter of one of SGLang's files as imported under ``module``: its top level run (its logger and
    the imports the readings do not need call outside the file: skipped), ``unmodelled`` the reading's hook."""
    interp = Interpreter(source.text, source.path, fakes=fakes, objects=objects)
    interp.unmodelled = unmodelled
    interp.globals.values["__name__"] = module
    interp.run_module(skip_failures=True)
    return interp


def after_init(init: ast.FunctionDef, stop: int | None, me: Namespace) -> None:
    """What ``CustomAllReduceV2.__init__`` sets after ``stop`` (where it starts allocating the workspace) that
    the dispatch reads: its closing ``self.disabled = False``. (``_init_workspace``'s multicast switch is
    ``artune.formats.sglang.dispatch._no_multicast``.)"""
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


# ---------------------------------------------------------------- SGLang 0.5.23, written out for reference:sglang
#
# reference:sglang has no file to read, so what 0.5.23's code does is stated here once: its Heuristic, the
# workspace CustomAllReduceV2.__init__ sizes by default, the config's clip, the order of _pick_config and the
# arch dispatch of _get_all_reduce_configs (configs/custom_all_reduce_v2.py and custom_all_reduce_v2.py of the
# released wheel). tests/test_oracle_sglang.py holds reference:sglang equal to the release's own code.

ALIGN_BYTES = 1024  # _ALIGN_BYTES: each workspace is a whole number of KiB, at least one
# the legacy CustomAllreduce (custom_all_reduce.py): on PCIe-only GPUs can_use_custom_all_reduce_v2 declines and
# it runs at two ranks (its only PCIe world size), up to _MAX_CAR_SIZE = 8192 * 1024 (should_custom_ar: <=)
LEGACY_PCIE_WORLD_SIZE = 2
LEGACY_MAX_SIZE = 8192 * 1024


class Heuristic(NamedTuple):
    """One mode's row of 0.5.23, in SGLang's units: thresholds int()-ed, ``mc`` a (min, max) range kept as written."""

    one_shot_push: int
    one_shot_pull: int
    two_shot_pull: int
    mc: tuple[float, float] = (0, 0)
    two_shot_push: int = 0


def _ceil_align(nbytes: int) -> int:
    return -(-nbytes // ALIGN_BYTES) * ALIGN_BYTES


def push_slot_bytes(nbytes: int, world_size: int) -> int:
    """``two_shot_push_slot_bytes``: a slot holds two halves of a ``ceil(nbytes / world_size)`` chunk, in 16 B."""
    return 32 * -(-nbytes // (16 * world_size))


def push_slot_capacity(slot_bytes: int, world_size: int) -> int:
    """``two_shot_push_max_bytes``: the largest tensor a push slot of ``slot_bytes`` fits."""
    return world_size * 16 * (slot_bytes // 32)


def workspace(rows: tuple[Heuristic, ...], world_size: int, cap: int) -> tuple[int, int]:
    """``(max_pull_size, max_push_size)`` as ``__init__`` sizes them by default: what the rows need, at most
    ``cap`` (the 16 MiB ``SGLANG_CUSTOM_ALL_REDUCE_V2_MAX_SIZE_KB``), rounded up to whole KiB."""
    pull = min(max(max(h.one_shot_pull, h.two_shot_pull, h.mc[1]) for h in rows), cap)
    push = min(max(max(h.one_shot_push, push_slot_bytes(h.two_shot_push, world_size)) for h in rows), cap)
    return _ceil_align(max(int(pull), ALIGN_BYTES)), _ceil_align(max(int(push), ALIGN_BYTES))


def clip(h: Heuristic, pull: int, push: int, world_size: int) -> Heuristic:
    """``Heuristic.clip``: every pull bound (the mc range's both ends, as ``Range.clip``) at most ``pull``, the
    push threshold at most ``push``, the two-shot push threshold at most what a push slot fits."""
    return Heuristic(
        min(h.one_shot_push, push),
        min(h.one_shot_pull, pull),
        min(h.two_shot_pull, pull),
        (min(h.mc[0], pull), min(h.mc[1], pull)),
        min(h.two_shot_push, push_slot_capacity(push, world_size)),
    )


def first_match(h: Heuristic, multicast: bool) -> list[SizeRule]:
    """``_pick_config``'s order as first-match rules: 1shot_push, 2shot_push, 1shot_pull, the multicast two-shot
    (where ``num_mc_blocks`` is set; ``Range.contains`` is ``min_bytes <= n <= max_bytes`` with the float bounds
    as written), 2shot_pull; nccl above."""
    lo, hi = h.mc
    rules = [
        upto("1shot_push", h.one_shot_push),
        upto("2shot_push", h.two_shot_push),
        upto("1shot_pull", h.one_shot_pull),
    ]
    if multicast:
        rules.append(SizeRule("2shot_pull_mc", max(0, math.ceil(lo)), math.floor(hi)))
    rules.append(upto("2shot_pull", h.two_shot_pull))
    return rules


def arch_configs(major: int, minor: int) -> str:
    """``_get_all_reduce_configs``: which configs a GPU of capability ``major.minor`` gets ("default": the rest)."""
    if major == 9:
        return "9.0"
    if major == 10:
        return "10.7" if minor >= 7 else "10.0"
    return "default"


def as_run(bands: tuple[Band, ...]) -> tuple[Band, ...]:
    """First-match bands as SGLang can run them: per band the first candidate, then (where that one needs
    multicast) the first that does not. Its algorithms share every other condition (16-byte sizes, any dtype),
    so multicast is the only choice left at run time; nccl stands for "none"."""
    out: list[Band] = []
    for band in bands:
        first = band.candidates[0]
        plain = next((c for c in band.candidates if not SPECS[c].conditions.multicast), "nccl")
        candidates = tuple(dict.fromkeys((first, plain)))
        if out and out[-1].candidates == candidates:
            out[-1] = Band(band.upto, candidates)
        else:
            out.append(Band(band.upto, candidates))
    while out and out[-1].candidates == ("nccl",):
        out.pop()
    return tuple(out)
