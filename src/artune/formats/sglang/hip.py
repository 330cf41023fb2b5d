"""SGLang on ROCm (HIP): the machine its files ask, answered, and its QuickReduce read by its own code.

On an AMD GPU SGLang's ``is_hip()`` is true, and the same files decide
otherwise: ``dispatch_custom_allreduce`` returns SGLang's own ``CustomAllreduce``
in its deterministic one-stage mode (``SGLANG_USE_1STAGE_ALLREDUCE``, or
deterministic inference), else AITER's ``CustomAllreduce`` (``SGLANG_USE_AITER_AR``,
on by default), else SGLang's own; ``GroupCoordinator`` also builds a
``QuickAllReduce`` (``quick_all_reduce.py``) on gfx94*/gfx95* and runs it
where the custom all-reduce declines a size (``_resolve_outplace_all_reduce_method``:
``ca``, then ``qr``). Everything is read with the restricted evaluator, as on
CUDA (``artune.formats.sglang.dispatch``); this module holds only what the
files ask outside themselves on that machine:

- the GPU: what torch reports on ROCm for the gfx arch, taken from the
  machine ``artune.formats.vllm.world.GpuGroup`` describes for vLLM's ROCm
  reading (``gcnArchName``, the capability HIP reports);
- AITER's ``CustomAllreduce``: AITER's package, not SGLang's, so its facts are
  those the vLLM reading stands in for (``AITER_WORLD_SIZES``,
  ``AITER_MAX_SIZE``; one host of fully connected GPUs, 16-byte sizes);
- sgl-kernel's QuickReduce ops: built in (``IS_QUICK_AR_AVAILABLE``), every
  GPU of a host connected to every other (XGMI), ``qr_max_size()`` the
  kernel's 2 GiB buffer;
- the environment: ``os.environ`` holds ``settings`` only.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from artune import rocm
from artune.errors import Raised, Unsupported
from artune.formats.files import SourceFile
from artune.formats.pyeval import Function, Interpreter, Namespace, Native, Symbol, Unmodelled
from artune.formats.sglang.rules import OPS, lifted
from artune.formats.vllm.switches import Switch
from artune.formats.vllm.world import AITER_MAX_SIZE, AITER_WORLD_SIZES, QR_MAX_SIZE, QUICK_LEVELS, ROW, GpuGroup

#: the AMD archs a ROCm reading is made for (those ``artune.rocm`` has facts for that SGLang's QuickReduce takes)
ARCHS = ("gfx942", "gfx950")
AITER = "AiterCustomAllreduce"  # what the dispatch imports AITER's CustomAllreduce as
AITER_CLASS = "aiter.dist.device_communicators.custom_all_reduce.CustomAllreduce"
QUICK = "QuickAllReduce"
QUICK_MODULE = "sglang.srt.distributed.device_communicators.quick_all_reduce"
DETERMINISTIC_KERNEL = "custom_ar_v1_1stage"  # the legacy class's deterministic one-stage kernel (artune.catalog)
FALLBACK = "rccl"  # on ROCm torch's nccl backend and pynccl load RCCL (artune.catalog)
#: the switches SGLang's HIP path reads, in the order ``explain`` lists them (environ.py's, and os.environ's)
SWITCHES = (
    "SGLANG_USE_1STAGE_ALLREDUCE",
    "SGLANG_ENABLE_DETERMINISTIC_INFERENCE",
    "SGLANG_USE_AITER_AR",
    "ROCM_QUICK_REDUCE_QUANTIZATION",
    "ROCM_QUICK_REDUCE_CAST_BF16_TO_FP16",
    "ROCM_QUICK_REDUCE_MAX_SIZE_BYTES_MB",
)


def machine(gfx: str, state: Any) -> GpuGroup:
    """The machine ``state`` describes (its world size and hosts) with an AMD GPU of arch ``gfx``."""
    return GpuGroup(gfx, state.world_size, hosts=state.hosts, platform=rocm.KIND)


def fakes(gfx: str, state: Any, settings: Mapping[str, str]) -> dict[str, Any]:
    """What SGLang's files ask outside themselves on a ROCm machine of arch ``gfx`` (over ``rules.fakes``)."""
    capability = machine(gfx, state).capability

    def properties(*_args: Any) -> Namespace:
        major, minor = capability
        gcn = machine(gfx, state).gfx
        values = {"gcnArchName": gcn, "major": major, "minor": minor, "multi_processor_count": Symbol("sms")}
        return Namespace("DeviceProperties", values)

    def partial(func: Any, *_args: Any, **_kwargs: Any) -> Any:
        # dispatch_custom_allreduce returns partial(AiterCustomAllreduce, enable_register_for_capturing=...):
        # the class GroupCoordinator builds; registering captured inputs changes no size it takes
        return func

    def environ_get(name: str, default: Any = None) -> Any:
        return settings.get(name, default)

    def tensor(data: Any, *_args: Any, **_kwargs: Any) -> Namespace:
        items = list(data) if isinstance(data, (list, tuple)) else [data]
        return Namespace("torch.Tensor", {"item": Native(lambda: items[0] if items else 0, "Tensor.item")})

    def quiet(name: str) -> Native:
        return Native(lambda *a, **k: None, name)

    return {
        "torch.cuda.get_device_capability": lambda *a: capability,
        "torch.cuda.get_device_properties": Native(properties, "torch.cuda.get_device_properties"),
        "torch.cuda.device_count": Native(lambda: state.world_size // state.hosts, "torch.cuda.device_count"),
        "is_cuda": Native(lambda: False, "is_cuda"),
        "is_hip": Native(lambda: True, "is_hip"),
        "is_sm100_supported": lambda *a: False,
        "is_sm90_supported": lambda *a: False,
        AITER_CLASS: Symbol(AITER),  # AITER installed: the import succeeds (the class is read as its facts)
        "functools.partial": Native(partial, "functools.partial"),
        "partial": Native(partial, "functools.partial"),
        "os.environ.get": Native(environ_get, "os.environ.get"),
        "torch.tensor": Native(tensor, "torch.tensor"),
        "torch.distributed.get_backend": Native(lambda *a: "gloo", "dist.get_backend"),
        "torch.distributed.Backend.NCCL": "nccl",
        "torch.distributed.all_gather": quiet("dist.all_gather"),
        "torch.distributed.all_gather_object": quiet("dist.all_gather_object"),
        # custom_all_reduce_utils.is_full_nvlink on ROCm: every GPU of an MI300 host reaches every other (XGMI)
        "is_full_nvlink": Native(lambda *a, **k: True, "is_full_nvlink"),
        # custom_all_reduce_ops on HIP: sgl-kernel's custom and quick all-reduce are built in
        f"{OPS}.IS_CUSTOM_AR_AVAILABLE": True,
        f"{OPS}.IS_QUICK_AR_AVAILABLE": True,
        f"{OPS}.init_custom_qr": Native(lambda *a, **k: 1, "ops.init_custom_qr"),
        f"{OPS}.qr_max_size": Native(lambda: QR_MAX_SIZE, "ops.qr_max_size"),
        f"{OPS}.qr_get_handle": Native(lambda *a: b"", "ops.qr_get_handle"),
        f"{OPS}.qr_open_handles": quiet("ops.qr_open_handles"),
    }


def aiter_admits(world_size: int, hosts: int) -> Callable[[int], bool]:
    """AITER's ``CustomAllreduce`` as the vLLM reading stands in for it: on at ``AITER_WORLD_SIZES`` on one host,
    taking 16-byte sizes up to ``AITER_MAX_SIZE``."""
    on = world_size in AITER_WORLD_SIZES and hosts == 1
    return lambda nbytes: on and nbytes % ROW == 0 and nbytes <= AITER_MAX_SIZE


Report = Callable[[str, str, str, str], None]  # (function, "FILE:LINE", what was met, what artune assumed)


class Quick:
    """``quick_all_reduce.py`` on one machine: ``QuickAllReduce`` built as ``GroupCoordinator`` builds it, and
    its ``should_quick_allreduce`` asked per size."""

    def __init__(
        self, source: SourceFile, fakes: dict[str, Any], unmodelled: Callable[[Unmodelled], None], report: Report
    ) -> None:
        self.source = source
        self.report = report
        # objects: its QuickReduceRegime is an Enum, and qr_rocm_arch_available a try/except
        self.interp = lifted(source, fakes, unmodelled, QUICK_MODULE, objects=True)
        self.methods = self.interp.class_methods(QUICK) if _defines(self.interp, QUICK) else {}
        available = self.interp.globals.values.get("qr_rocm_arch_available")
        self.available = available if isinstance(available, Function) else None

    def where(self, line: int | None) -> str:
        return f"{self.source.path}:{line or 1}"

    def build(self) -> Namespace | None:
        """The communicator ``GroupCoordinator`` builds on the machine the fakes describe (``qr_rocm_arch_available``
        first, as it asks), or None where it does not build one or builds it disabled."""
        init = self.methods.get("__init__")
        if init is None:
            self.report(QUICK, self.where(None), f"no class {QUICK} with an __init__ here", "QuickReduce is off")
            return None
        try:
            if self.available is not None and not self.interp.call(self.available, [], {}):
                return None
            me = self.interp.instance(QUICK)
            status, line, name = self.interp.run_until_outside(init, [me, Symbol("group"), _device()])
        except Raised:
            return None  # GroupCoordinator: "Failed to initialize QuickAllReduce", no QuickReduce
        except Unsupported as err:
            where = self.where(init.node.lineno)
            self.report(f"{QUICK}.__init__", where, f"the call ended with: {err}", "QuickReduce is off")
            return None
        if status == "stopped":
            self.report(
                f"{QUICK}.__init__",
                self.where(line),
                f"calls {name} (outside the file), which artune does not stand in for",
                "QuickReduce is off",
            )
            return None
        return None if me.values.get("disabled") is not False else me

    def level(self, me: Namespace) -> str | None:
        """artune's name for the level ``me`` runs (``qr_quant_level``, as ``qr_all_reduce`` is handed it)."""
        value = getattr(me.values.get("qr_quant_level"), "values", {}).get("value")
        return QUICK_LEVELS[value] if isinstance(value, int) and 0 <= value < len(QUICK_LEVELS) else None

    def admits(self, me: Namespace, tensor: Namespace) -> bool:
        """``should_quick_allreduce(input_)``, false where the evaluator cannot follow it (the caveat says so)."""
        func = self.methods.get("should_quick_allreduce")
        if func is None:
            self.report(QUICK, self.where(None), f"{QUICK} has no should_quick_allreduce()", "it takes no size")
            return False
        try:
            return bool(self.interp.call(func, [me, tensor], {}))
        except Raised:
            return False
        except Unsupported as err:
            where = self.where(func.node.lineno)
            self.report(f"{QUICK}.should_quick_allreduce", where, f"the call ended with: {err}", "it returns False")
            return False


def _defines(interp: Interpreter, name: str) -> bool:
    return any(getattr(s, "name", None) == name for s in interp.tree.body)


def _device() -> Namespace:
    return Namespace("torch.device", {"type": "cuda", "index": 0})


# ---------------------------------------------------------------- the switches, as explain names them


def switches(
    files: Iterable[SourceFile | None], env: Mapping[str, Any], settings: Mapping[str, str]
) -> dict[str, Switch]:
    """``SWITCHES`` as the release reads them: ``envs.NAME`` at ``environ.py``'s value (``env``), and
    ``get_bool_env_var(NAME, default=...)`` / ``os.environ.get(NAME, default)`` at the default written in
    ``files`` where unset; a switch none of them reads is left out."""
    defaults: dict[str, Any] = {}
    for source in files:
        if source is None:
            continue
        for node in ast.walk(ast.parse(source.text)):
            if not (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)):
                continue
            name, func = node.args[0].value, ast.unparse(node.func)
            if name not in SWITCHES or not func.endswith(("get_bool_env_var", "environ.get")):
                continue
            given = node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords), None)
            defaults[name] = given.value if isinstance(given, ast.Constant) else None
    out = {}
    for name in SWITCHES:
        if name in defaults:
            out[name] = Switch(name, settings.get(name, defaults[name]), name in settings)
        elif name in env and any(s is not None and f"envs.{name}" in s.text for s in files):
            out[name] = Switch(name, env[name], name in settings)
    return out


def decided_by(algorithm: str, found: Mapping[str, Switch]) -> str:
    """The switch that decided ``algorithm`` on ROCm, and how, in one line."""
    named = lambda *names: " and ".join(str(found[n]) for n in names if n in found) or "no switch"  # noqa: E731
    one_stage = named("SGLANG_USE_1STAGE_ALLREDUCE", "SGLANG_ENABLE_DETERMINISTIC_INFERENCE")
    level = named("ROCM_QUICK_REDUCE_QUANTIZATION")
    if algorithm == DETERMINISTIC_KERNEL:
        return f"{one_stage}: SGLang's own CustomAllreduce in its deterministic one-stage mode takes every size"
    if algorithm == "aiter_ar":
        return f"{named('SGLANG_USE_AITER_AR')} ({one_stage}): AITER's custom all-reduce"
    if algorithm == "custom_ar_v1":
        return f"{named('SGLANG_USE_AITER_AR')}: SGLang's own CustomAllreduce (AITER's is off)"
    if algorithm.startswith("quick_ar_"):
        cast = found.get("ROCM_QUICK_REDUCE_CAST_BF16_TO_FP16")
        rows = "float16 rows (bfloat16 cast)" if cast is not None and str(cast.value) != "0" else "the dtype's rows"
        return (
            f"{level}: QuickReduce at this level where the custom all-reduce declines the size, from _QR_MIN_SIZE's "
            f"{rows} up to {named('ROCM_QUICK_REDUCE_MAX_SIZE_BYTES_MB')} (0: ops.qr_max_size(), 2 GiB)"
        )
    return f"{level}: no custom path takes this size, so RCCL runs"


__all__ = [
    "AITER",
    "ARCHS",
    "DETERMINISTIC_KERNEL",
    "FALLBACK",
    "QUICK",
    "SWITCHES",
    "Quick",
    "aiter_admits",
    "decided_by",
    "fakes",
    "machine",
    "switches",
]
