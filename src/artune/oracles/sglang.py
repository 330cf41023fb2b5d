"""SGLang's own code as the oracle: a released ``CustomAllReduceV2`` built and asked, size by size.

Engine side: the release's configs module (0.5.16 on) is imported as it
is, with the CPU torch; it imports only ``torch``, ``functools`` and
``typing``. The communicator module cannot be imported (it needs SGLang's
kernels and a GPU), so its top level is lifted out of its source with
``ast`` and executed with every import from SGLang bound to a stand-in:

- the GPU: ``torch.cuda.get_device_capability()`` answers the probed arch
  and ``get_device_properties().multi_processor_count`` an SM count (block
  counts only: no decision depends on it);
- the machine: one host whose GPUs all see each other over NVLink (the
  answer ``can_use_custom_all_reduce_with_nvlink`` gives there), or PCIe
  only (``nvlink=False``: its answer without NVLink between every pair), a
  symmetric memory with or without a multicast address, every environment
  variable at the default ``environ.py`` gives it unless ``env`` sets it;
- the kernels: recorders that note which algorithm (and multicast) the
  communicator launches; the legacy communicator's kernel is recorded as
  ``custom_ar_v1``.

The class is SGLang's own choice: ``custom_all_reduce.py`` is lifted the same
way and its ``dispatch_custom_allreduce`` asked, as ``GroupCoordinator`` asks
it; it answers ``CustomAllReduceV2`` where v2 is on and (0.5.13 on)
``can_use_custom_all_reduce_v2`` admits the group, and the legacy
``CustomAllreduce`` otherwise. Then the chosen class is built for real at
each world size (v2 sizes its config through the config's own ``clip``;
where a constructor raises, ``GroupCoordinator`` logs "Setup Custom allreduce
failed" and runs NCCL), and each probe goes through its real
``should_custom_ar`` and ``custom_all_reduce``: nccl where the first says no,
the recorded kernel otherwise. Graph-mode probes run inside the
communicator's own ``capture()``. In 0.5.10 and 0.5.11 v2 is opt-in
(``SGLANG_USE_JIT_ALL_REDUCE=1``): by default the legacy class runs.

``RELEASES``: ``pip index versions sglang`` lists the 0.5.x releases; each
was downloaded and only those with ``custom_all_reduce_v2.py`` kept
(0.5.10 is the first; 0.5.1-0.5.9 have none).
"""

from __future__ import annotations

import ast
import contextlib
import enum
import inspect
import logging
import math
import os
import sys
import traceback
import types
from collections.abc import Iterable, Iterator
from contextlib import ExitStack, contextmanager
from functools import cache
from pathlib import Path
from typing import Any
from unittest import mock

from artune import rocm
from artune.errors import OracleGap
from artune.formats.engine import Oracle
from artune.formats.fingerprints import Evaluated
from artune.formats.vllm.world import AITER_MAX_SIZE, AITER_WORLD_SIZES, QR_MAX_SIZE, QUICK_LEVELS
from artune.oracles import MODES, RACK_TOPOLOGIES, Probe, decide_all, read_decisions
from artune.oracles import rocm_probes as grid_of_rocm_probes

RELEASES: tuple[str, ...] = (
    "0.5.10",
    "0.5.10.post1",
    "0.5.11",
    "0.5.12",
    "0.5.12.post1",
    "0.5.13",
    "0.5.13.post1",
    "0.5.14",
    "0.5.15",
    "0.5.15.post1",
    "0.5.16",
    "0.5.17",
    "0.5.18",
    "0.5.19",
    "0.5.20",
    "0.5.21",
    "0.5.22",
    "0.5.23",
)
# probed arches and the SM count each answers (9.0 H200, 10.0 B200, 10.3 B300; 10.7 Rubin and 12.0, which no
# release has a row for, any count: only block counts read it)
ARCHS: dict[str, int] = {"9.0": 132, "10.0": 148, "10.3": 148, "10.7": 160, "12.0": 188}
WORLD_SIZES = tuple(range(2, 17))

_DIR = "sglang/srt/distributed/device_communicators"
COMMUNICATOR = f"{_DIR}/custom_all_reduce_v2.py"
DISPATCHER = f"{_DIR}/custom_all_reduce.py"  # dispatch_custom_allreduce and the legacy CustomAllreduce
LEGACY_KERNEL = "custom_ar_v1"  # what artune's catalog calls the legacy class's kernel (sgl_kernel.allreduce)
DETERMINISTIC_KERNEL = "custom_ar_v1_1stage"  # its deterministic one-stage kernel on ROCm (artune's catalog)
QUICK = f"{_DIR}/quick_all_reduce.py"  # QuickAllReduce, which GroupCoordinator builds beside it on ROCm
CONFIGS = f"{_DIR}/configs/custom_all_reduce_v2.py"
ENVIRON = "sglang/srt/environ.py"
KERNELS = "sglang/kernels/ops/communication/all_reduce.py"
_REAL_IMPORTS = ("logging", "contextlib", "typing", "dataclasses", "enum", "functools", "os", "math", "torch")
_ALGOS = {
    "ONE_SHOT_PUSH": "1shot_push",
    "TWO_SHOT_PUSH": "2shot_push",
    "ONE_SHOT_PULL": "1shot_pull",
    "TWO_SHOT_PULL": "2shot_pull",
}


class _Stub:
    """Whatever SGLang's kernels and helpers hand back: every attribute and call is another stub."""

    def __init__(self, name: str = "stub") -> None:
        self._name = name

    def __getattr__(self, name: str) -> _Stub:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Stub(f"{self._name}.{name}")

    def __call__(self, *args: Any, **kwargs: Any) -> _Stub:
        return _Stub(f"{self._name}()")

    def __iter__(self) -> Iterator[Any]:
        return iter(())

    def __getitem__(self, key: Any) -> _Stub:
        return _Stub(f"{self._name}[]")

    def __len__(self) -> int:
        return 0

    def __bool__(self) -> bool:
        return False


class _StandInState:
    """The group's size and whether a CUDA graph is being captured, for the stand-ins."""

    world_size = 2
    capturing = False
    hosts = 1  # the hosts the ranks span
    rack = False  # across hosts: one NVLink clique, the caching allocator VMM-backed (expandable segments)
    nvlink = True  # on one host: NVLink between every pair of GPUs (False: PCIe only)
    launched: list[tuple[Any, bool]]

    def __init__(self) -> None:
        self.launched = []


def _env_values(root: Path, env: dict[str, str]) -> dict[str, Any]:
    """``environ.py``'s ``Envs``: what ``envs.NAME.get()`` returns, each variable's default unless ``env`` sets
    it (parsed as its field's kind parses it: ``EnvBool`` takes "1"/"true"/"yes"/"y" and their opposites)."""
    path = root / ENVIRON
    if not path.is_file():  # a checkout of the communicators alone: the defaults of what they read
        from artune.formats.sglang.rules import ENV_DEFAULTS

        return dict(ENV_DEFAULTS) | {
            name: _parse_env(type(v).__name__, env[name]) for name, v in ENV_DEFAULTS.items() if name in env
        }
    out: dict[str, Any] = {}
    for stmt in ast.parse(path.read_text()).body:
        if isinstance(stmt, ast.ClassDef) and stmt.name == "Envs":
            for item in stmt.body:
                if isinstance(item, ast.Assign) and isinstance(item.value, ast.Call) and item.value.args:
                    names = [t.id for t in item.targets if isinstance(t, ast.Name)]
                    kind = ast.unparse(item.value.func)
                    try:
                        value = eval(compile(ast.Expression(item.value.args[0]), str(path), "eval"), {})
                    except Exception:
                        continue  # a computed default: not one the communicator reads
                    for name in names:
                        out[name] = _parse_env(kind, env[name]) if name in env else value
    return out


def _parse_env(kind: str, text: str) -> Any:
    if "Bool" in kind:
        lowered = text.lower()
        if lowered not in ("true", "1", "yes", "y", "false", "0", "no", "n"):
            raise OracleGap(f"{text!r} is not a boolean SGLang's EnvBool parses")
        return lowered in ("true", "1", "yes", "y")
    if "Int" in kind:
        return int(text)
    if "Float" in kind:
        return float(text)
    return text


class _Var:
    def __init__(self, value: Any, given: bool) -> None:
        self.value = value
        self.given = given

    def get(self) -> Any:
        return self.value

    def is_set(self) -> bool:
        return self.given


class _Envs:
    def __init__(self, defaults: dict[str, Any], env: dict[str, str]) -> None:
        self._defaults = defaults
        self._env = env

    def __getattr__(self, name: str) -> _Var:
        if name not in self._defaults:
            raise OracleGap(f"environ.py has no default for {name}")
        return _Var(self._defaults[name], name in self._env)


def _algo_enum(root: Path, communicator: ast.Module) -> Any:
    """SGLang's ``AllReduceAlgo``: lifted from its kernels module where the release ships it, else an enum of
    the members the communicator names."""
    path = root / KERNELS
    if path.is_file():
        tree = ast.parse(path.read_text())
        wanted = [
            n
            for n in tree.body
            if (isinstance(n, ast.ClassDef) and n.name == "AllReduceAlgo")
            or (isinstance(n, ast.Assign) and any(getattr(t, "id", "") == "_ALGO_NAMES" for t in n.targets))
        ]
        if wanted:
            namespace: dict[str, Any] = {"enum": enum}
            exec(compile(ast.Module(wanted, []), str(path), "exec"), namespace)
            return namespace["AllReduceAlgo"]
    names = sorted(
        {
            n.attr
            for n in ast.walk(communicator)
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "AllReduceAlgo"
        }
    )
    return enum.Enum("AllReduceAlgo", names)


class Engine:
    """One release on one GPU: its configs module imported, its communicator modules lifted and run.

    ``env``: environment variables set as a user sets them (``{"SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2": "0"}``);
    every other one is at its default."""

    def __init__(self, root: Path, arch: str, env: dict[str, str] | None = None) -> None:
        import torch

        self.root, self.arch, self.torch = root, arch, torch
        self.env = dict(env or {})
        #: an AMD GPU by gfx arch: SGLang's HIP path (is_hip() true), torch reporting HIP's capability
        self.gfx = rocm.gfx_arch(arch) if rocm.is_gfx(arch) else ""
        facts = rocm.arch_facts(self.gfx) if self.gfx else None
        major, minor = (int(x) for x in (facts.capability if facts else "0.0" if self.gfx else arch).split("."))
        self.cap = (major, minor)
        self.props = types.SimpleNamespace(
            multi_processor_count=ARCHS.get(arch, 132),
            major=major,
            minor=minor,
            gcnArchName=f"{self.gfx}:sramecc+:xnack-" if self.gfx else "",
        )
        self.process_group = "rccl" if self.gfx else "nccl"  # what torch's nccl backend and pynccl load there
        self.state = _StandInState()
        self.multicast = True
        self.failures: dict[int, str] = {}  # world size -> what __init__ raised (SGLang then runs nccl)
        self.aiter = _aiter_modules(self) if self.gfx else {}  # AITER's package, installed on ROCm
        self.package = _module(f"_sglang_{id(self)}", root)  # the relative imports inside functions resolve here
        self.package.__path__ = []
        with self.gpu():
            self.configs = self._import_configs()
            self.namespace = self._lift(COMMUNICATOR)
            self.dispatcher = self._lift(DISPATCHER) if (root / DISPATCHER).is_file() else None
            self.quick = self._lift(QUICK) if self.gfx and (root / QUICK).is_file() else None
        self.cls = self.namespace["CustomAllReduceV2"]
        if self.dispatcher is not None and "CustomAllreduce" in self.dispatcher:
            self.dispatcher["CustomAllreduce"].__del__ = lambda self: None  # close() would free stand-in memory

    @contextmanager
    def gpu(self) -> Iterator[None]:
        """``torch.cuda`` answering for the probed GPU while the release's code runs."""
        cuda = self.torch.cuda
        state = self.state
        with ExitStack() as stack:
            for name, value in {
                "get_device_capability": lambda *a: self.cap,
                "get_device_properties": lambda *a: self.props,
                "current_device": lambda: 0,
                "device_count": lambda: state.world_size,
                "is_available": lambda: True,
                "synchronize": lambda *a: None,
                "is_current_stream_capturing": lambda: state.capturing,
            }.items():
                stack.enter_context(mock.patch.object(cuda, name, value))
            if self.gfx:  # AITER installed: the dispatch's own import of its CustomAllreduce succeeds
                stack.enter_context(_installed(self.aiter))
            yield

    def _import_configs(self) -> types.ModuleType | None:
        path = self.root / CONFIGS
        if not path.is_file():
            return None
        module = _module(f"_sglang_configs_{id(self)}", path)
        exec(compile(path.read_text(), str(path), "exec"), module.__dict__)  # a released wheel's file
        return module

    def _stand_ins(self, tree: ast.Module) -> dict[str, Any]:
        state, torch = self.state, self.torch

        def nvlink(*_a: Any, supported_world_size: Any = (), **_k: Any) -> bool | None:
            # can_use_custom_all_reduce_with_nvlink (custom_all_reduce_utils.py): None ("disabled") across nodes
            # and at a world size outside the list; without NVLink between every pair, None above 2 GPUs ("not
            # supported on more than two PCIe-only GPUs") and False (PCIe, peer access working) at 2
            if state.world_size not in supported_world_size or state.hosts > 1:
                return None
            if state.world_size > 2 and not state.nvlink:
                return None
            return state.nvlink

        def same_node(*_a: Any, **_k: Any) -> list[bool]:
            per_host = state.world_size // state.hosts
            return [rank < per_host for rank in range(state.world_size)]

        def gather(out: list[Any], tensor: Any, group: Any = None) -> None:
            for item in out:
                item.copy_(tensor)

        def gather_object(out: list[Any], obj: Any, group: Any = None) -> None:
            out[:] = [obj] * len(out)

        sent: list[Any] = []

        def broadcast(objects: list[Any], src: int = 0, **_k: Any) -> None:
            # every rank sends what rank 0 (this process) sent: the group is symmetric
            if objects and objects[0] is not None:
                sent[:] = [list(objects)]
            elif sent:
                objects[:] = sent[0]

        def launch(comm: Any, inp: Any, *args: Any, **kwargs: Any) -> Any:
            # custom_all_reduce(comm, input, algo=, graph_params=, use_multicast=) from 0.5.19;
            # custom_all_reduce(comm, input, algo, pull_arg) before, pull_arg True for multicast
            algo = kwargs.get("algo", args[0] if args else None)
            multicast = kwargs["use_multicast"] if "use_multicast" in kwargs else len(args) > 1 and args[1] is True
            state.launched.append((algo, bool(multicast)))
            return torch.empty(0)

        class _Module:  # get_all_reduce_module(dtype, world_size): the eager launch of 0.5.23
            def all_reduce(self, comm: Any, inp: Any, algo_name: str, graph_params: Any, use_multicast: bool) -> Any:
                state.launched.append((algo_name, bool(use_multicast)))
                return torch.empty(0)

        def legacy_launch(*_a: Any, **_k: Any) -> None:  # sgl_kernel.allreduce.all_reduce: the legacy kernel
            state.launched.append((LEGACY_KERNEL, False))

        def launched(name: str) -> Any:
            return lambda *a, **k: state.launched.append((name, False))

        def quick_launch(ptr: Any, inp: Any, out: Any, level: int, *a: Any, **k: Any) -> None:
            state.launched.append((QUICK_LEVELS[level], False))  # QuickReduceRegime's value: artune's level

        legacy_ops = types.SimpleNamespace(  # custom_all_reduce_ops: sgl_kernel's custom (and on HIP quick) all-reduce
            IS_CUSTOM_AR_AVAILABLE=True,
            IS_QUICK_AR_AVAILABLE=bool(self.gfx),
            meta_size=lambda: 0,
            init_custom_ar=lambda *a, **k: 1,
            register_buffer=lambda *a, **k: None,
            all_reduce=legacy_launch,
            dispose=lambda *a, **k: None,
            get_graph_buffer_ipc_meta=lambda *a: ([], []),
            register_graph_buffers=lambda *a, **k: None,
            # HIP: the legacy kernel through its own buffer, and its deterministic one-stage kernel
            allocate_meta_buffer=lambda size: torch.empty(size, dtype=torch.uint8, device="meta"),
            get_meta_buffer_ipc_handle=lambda *a: b"",
            all_reduce_reg=launched(LEGACY_KERNEL),
            all_reduce_unreg=launched(LEGACY_KERNEL),
            deterministic_all_reduce_reg=launched(DETERMINISTIC_KERNEL),
            deterministic_all_reduce_unreg=launched(DETERMINISTIC_KERNEL),
            init_custom_qr=lambda *a, **k: 1,
            qr_get_handle=lambda *a: b"",
            qr_open_handles=lambda *a, **k: None,
            qr_all_reduce=quick_launch,
            qr_max_size=lambda: QR_MAX_SIZE,
            qr_destroy=lambda *a: None,
        )

        def bool_env(name: str, default: str = "false") -> bool:  # sglang/srt/utils/common.py get_bool_env_var
            return self.env.get(name, default).lower() in ("true", "1")

        class _OldKernel(_Stub):  # get_custom_all_reduce_cls()(...) of 0.5.10-0.5.15
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__("kernel")

            def all_reduce(self, inp: Any, algo: Any) -> Any:
                state.launched.append((algo, False))
                return torch.empty(0)

            def share_storage(self) -> int:
                return 0

        configs = self.configs
        stand_ins: dict[str, Any] = {
            "dist": types.SimpleNamespace(
                get_rank=lambda *a, **k: 0,
                get_world_size=lambda *a, **k: state.world_size,
                barrier=lambda *a, **k: None,
                all_gather=gather,
                all_gather_object=gather_object,
                get_backend=lambda *a: "gloo",
                Backend=types.SimpleNamespace(NCCL="nccl"),
                get_process_group_ranks=lambda *a, **k: list(range(state.world_size)),
                broadcast_object_list=broadcast,
            ),
            "ops": legacy_ops,
            "is_cuda": lambda: not self.gfx,
            "is_hip": lambda: bool(self.gfx),
            # custom_all_reduce_utils.is_full_nvlink on ROCm: every GPU of an MI300 host reaches every other (XGMI)
            "is_full_nvlink": lambda *a: state.hosts == 1,
            # os.environ holds the probe's variables only (quick_all_reduce.py reads ROCM_QUICK_REDUCE_*)
            "os": types.SimpleNamespace(**{**vars(os), "environ": dict(self.env)}),
            "is_musa": lambda: False,
            "get_bool_env_var": bool_env,
            "AllReduceAlgo": _algo_enum(self.root, tree),
            "custom_all_reduce": launch,
            "get_all_reduce_module": lambda *a: _Module(),
            "get_custom_all_reduce_cls": lambda: _OldKernel,
            "can_use_custom_all_reduce_with_nvlink": nvlink,
            "in_the_same_node_as": same_node,
            # one fabric clique: every GPU of one host, or of a rack's hosts; none across a network
            "is_one_nvlink_clique": lambda *a: state.hosts == 1 or state.rack,
            "is_weak_contiguous": lambda inp: True,
            # cudaMalloc pointers on one host; in a rack the allocator is VMM-backed (expandable_segments:True)
            "is_vmm_pointer": lambda ptr: state.hosts > 1 and state.rack,
            "is_sm100_supported": lambda *a: self.cap[0] == 10,  # sglang/srt/utils/common.py, CUDA >= 12.8
            "is_sm90_supported": lambda *a: self.cap[0] == 9,
            "is_in_piecewise_cuda_graph": lambda: False,
            "is_in_tc_piecewise_cuda_graph": lambda: False,
            "log_info_on_rank0": lambda *a, **k: None,
            "envs": _Envs(_env_values(self.root, self.env), self.env),
            "_KERNEL_API_LOG_LEVEL": 0,  # sglang/kernels/kernel_api_logging.py: SGLANG_KERNEL_API_LOGLEVEL, 0
        }
        if configs is not None:
            for name in ("get_all_reduce_config", "get_supported_world_sizes"):
                if hasattr(configs, name):
                    stand_ins[name] = getattr(configs, name)
        return stand_ins

    def _lift(self, relative: str) -> dict[str, Any]:
        """One module of the release, its imports from SGLang bound to stand-ins, its own code run as it is."""
        path = self.root / relative
        tree = ast.parse(path.read_text(), str(path))
        stand_ins = self._stand_ins(tree)
        module = _module(f"{self.package.__name__}.{path.stem}", path)
        module.__package__ = self.package.__name__
        namespace = module.__dict__
        body: list[ast.stmt] = []
        for node in tree.body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                module = node.module if isinstance(node, ast.ImportFrom) else None
                for alias in node.names:
                    full = module or alias.name
                    bound = alias.asname or alias.name.split(".")[0]
                    real = (
                        not getattr(node, "level", 0)
                        and full.split(".")[0] in _REAL_IMPORTS
                        and not full.startswith("torch.distributed")
                    )
                    if bound in stand_ins:
                        namespace[bound] = stand_ins[bound]
                    elif real or (full == "torch.distributed" and alias.name == "ProcessGroup"):
                        exec(compile(ast.Module([node], []), str(path), "exec"), namespace)
                    else:
                        namespace[bound] = _Stub(bound)
                continue
            body.append(node)
        exec(compile(ast.Module(body, []), str(path), "exec"), namespace)  # the release's own code
        if isinstance(namespace.get("logger"), logging.Logger):
            namespace["logger"].disabled = True  # what it warns about is what the probes ask for
        torch = self.torch
        state = self

        def allocate(nbytes: int, device: Any, group: Any) -> tuple[Any, Any]:
            tensor = torch.empty(nbytes, dtype=torch.uint8, device="meta")
            symm = types.SimpleNamespace(
                multicast_ptr=(1 << 40) if state.multicast else 0,
                get_buffer=lambda rank, shape, dtype: torch.empty(shape, dtype=dtype, device="meta"),
            )
            return tensor, symm

        if relative == COMMUNICATOR:
            namespace["_allocate_symmetric_memory"] = allocate  # torch symmetric memory with or without multicast
            cls = namespace.get("CustomAllReduceV2")
            if cls is None:
                raise OracleGap(f"{path}: no class CustomAllReduceV2")
            cls.__del__ = lambda self: None  # close() at collection would only talk to the stand-ins again
        return namespace

    def choose(self, group: Any, device: Any) -> Any:
        """The class SGLang's own ``dispatch_custom_allreduce`` returns for ``group`` (v2 where the release has
        no dispatcher)."""
        if self.dispatcher is None:
            return self.cls
        dispatch = self.dispatcher.get("dispatch_custom_allreduce")
        if dispatch is None:
            raise OracleGap(f"{self.root / DISPATCHER}: no dispatch_custom_allreduce")
        takes = inspect.signature(dispatch).parameters
        return dispatch(group=group, device=device) if "group" in takes else dispatch()  # 0.5.10-0.5.12: none

    def build(self, world_size: int, multicast: bool, hosts: int = 1, rack: bool = False, nvlink: bool = True) -> Any:
        """The communicator SGLang builds at ``world_size`` on ``hosts`` hosts (``rack``: one NVLink clique;
        ``nvlink``: on one host, NVLink between every pair), or None where it disables or fails to build it."""
        self.state.world_size, self.multicast = world_size, multicast
        self.state.hosts, self.state.rack, self.state.nvlink = hosts, rack, nvlink
        group = types.SimpleNamespace(group_name="tp", rank=lambda: 0, size=lambda: world_size)
        device = self.torch.device("meta", 0)
        with self.gpu():
            try:  # GroupCoordinator: both in one try; any failure is "Setup Custom allreduce failed", no custom AR
                cls = self.choose(group, device)
                comm = None if cls is None else cls(group=group, device=device)
            except Exception as err:
                if not isinstance(err, (KeyError, AssertionError, ValueError)) and not self._own(err):
                    raise OracleGap(
                        f"the communicator at world size {world_size} failed on a stand-in: {err!r}"
                    ) from err
                self.failures[world_size] = f"{type(err).__name__}: {err}"
                return None
        return None if comm is None or comm.disabled else comm

    def _own(self, err: BaseException) -> bool:
        """Whether ``err`` was raised in the release's own code (not in a stand-in): SGLang's failure."""
        frames = list(traceback.walk_tb(err.__traceback__))
        return bool(frames) and Path(frames[-1][0].f_code.co_filename).is_relative_to(self.root)

    def build_quick(self) -> Any:
        """The ``QuickAllReduce`` ``GroupCoordinator`` builds beside the custom all-reduce on ROCm (where the
        release's own ``qr_rocm_arch_available()`` says so), or None (none built, or its constructor raised:
        "Failed to initialize QuickAllReduce"); the group is the one ``build`` set up."""
        if self.quick is None:
            return None
        group = types.SimpleNamespace(group_name="tp", rank=lambda: 0, size=lambda: self.state.world_size)
        with self.gpu():
            try:
                if not self.quick["qr_rocm_arch_available"]():
                    return None
                qr = self.quick["QuickAllReduce"](group=group, device=self.torch.device("meta", 0))
            except Exception as err:
                if not self._own(err):
                    raise OracleGap(f"QuickAllReduce failed on a stand-in: {err!r}") from err
                return None
        return None if qr.disabled else qr

    def answer(self, comm: Any, nbytes: int, graph: bool, quick: Any = None, dtype_name: str = "bfloat16") -> str:
        """What ``comm`` runs for one all-reduce of ``nbytes`` bytes of ``dtype_name`` (bf16: uint8 for an odd
        size) (inside ``capture()`` when ``graph``); on ROCm, where it declines, ``quick`` (GroupCoordinator's
        order: ``ca``, then ``qr``)."""
        torch = self.torch
        dtype, size = (torch.bfloat16, 2) if nbytes % 2 == 0 else (torch.uint8, 1)
        if dtype_name != "bfloat16":
            dtype = getattr(torch, dtype_name)
            size = torch.empty((), dtype=dtype).element_size()
        inp = torch.empty(nbytes // size, dtype=dtype, device="meta")
        self.state.capturing = graph
        self.state.launched.clear()
        if comm is None or not comm.should_custom_ar(inp):
            if quick is None or not quick.should_quick_allreduce(inp):
                return self.process_group
            quick.quick_all_reduce(inp)
            return self._launched(quick)
        comm.custom_all_reduce(inp)
        return self._launched(comm)

    def _launched(self, comm: Any) -> str:
        if not self.state.launched:
            raise OracleGap(f"{type(comm).__name__}.custom_all_reduce launched no kernel the stand-ins know")
        (algo, multicast), *_ = self.state.launched
        name = algo if isinstance(algo, str) else _ALGOS[algo.name]
        if multicast:
            if name != "2shot_pull":
                raise OracleGap(f"{name} with multicast has no name in artune")
            name = "2shot_pull_mc"
        return name

    def decide(
        self,
        world_size: int,
        multicast: bool,
        mode: str,
        sizes: list[int],
        hosts: int = 1,
        rack: bool = False,
        nvlink: bool = True,
        dtype: str = "bfloat16",
    ) -> list[str]:
        """The engine's answer for each size of ``dtype``, at one world size, multicast, mode and topology."""
        comm = self.build(world_size, multicast, hosts, rack, nvlink)
        quick = self.build_quick()
        if comm is None and quick is None:
            return [self.process_group] * len(sizes)
        with self.gpu():
            if mode == "graph":
                if comm is not None and not hasattr(comm, "capture"):
                    raise OracleGap(f"{type(comm).__name__} has no capture(): graph mode cannot be run as SGLang does")
                # GroupCoordinator.graph_capture: the custom all-reduce's capture(); QuickReduce needs none
                with comm.capture() if comm is not None else contextlib.nullcontext():
                    out = [self.answer(comm, n, True, quick, dtype) for n in sizes]
                    self.state.capturing = False  # capture() checks the stream is no longer capturing
                    if isinstance(getattr(comm, "_graph_inputs", None), list):
                        comm._graph_inputs.clear()  # no peer memory to register the captured inputs with
                return out
            return [self.answer(comm, n, False, quick, dtype) for n in sizes]

    def bounds(self, world_size: int) -> set[int]:
        """Every size the release's configs and sizing name at ``world_size`` (thresholds, ranges, workspace)."""
        found: set[float] = set()
        comm = self.build(world_size, True)
        if comm is not None:
            _numbers(getattr(comm, "config", None), found)  # the legacy class has no config: its max_size
            _numbers([getattr(comm, n, 0) for n in ("max_size", "max_pull_size", "max_push_size")], found)
            raw = self.namespace.get("THRESHOLD_2_SHOT_MAP") or {}
            if self.configs is not None and isinstance(comm, self.cls):
                with self.gpu():
                    raw = {world_size: self.configs.get_all_reduce_config(world_size)}
            _numbers(raw.get(world_size), found)
        return {b for v in found if 0 <= v < 1 << 40 for b in {math.floor(v), math.ceil(v)}}


@contextmanager
def _installed(modules: dict[str, types.ModuleType]) -> Iterator[None]:
    """``modules`` importable while the release's code runs (only those: torch's lazy imports stay loaded)."""
    saved = {name: sys.modules.get(name) for name in modules}
    sys.modules.update(modules)
    try:
        yield
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module


def _aiter_modules(engine: Engine) -> dict[str, types.ModuleType]:
    """AITER's package as installed beside SGLang on ROCm, standing in with its ``CustomAllreduce``'s facts
    (``AITER_WORLD_SIZES``, ``AITER_MAX_SIZE``: those of the vLLM oracle's AITER); its kernel is recorded."""
    state = engine.state

    class CustomAllreduce:  # aiter/dist/device_communicators/custom_all_reduce.py
        def __init__(self, group: Any, device: Any, max_size: int = 0, **kwargs: Any) -> None:
            self.disabled = state.world_size not in AITER_WORLD_SIZES or state.hosts > 1

        def should_custom_ar(self, inp: Any) -> bool:
            nbytes = inp.numel() * inp.element_size()
            return not self.disabled and nbytes % 16 == 0 and nbytes <= AITER_MAX_SIZE

        def custom_all_reduce(self, inp: Any) -> Any:
            state.launched.append(("aiter_ar", False))
            return inp

        def capture(self) -> Any:
            return contextlib.nullcontext()

    names = (
        "aiter",
        "aiter.dist",
        "aiter.dist.device_communicators",
        "aiter.dist.device_communicators.custom_all_reduce",
    )
    modules = {name: types.ModuleType(name) for name in names}
    modules[names[-1]].CustomAllreduce = CustomAllreduce  # type: ignore[attr-defined]
    return modules


def _module(name: str, path: Path) -> types.ModuleType:
    """An empty module for a release's file to run in, registered (dataclasses look their module up)."""
    module = types.ModuleType(name)
    module.__file__ = str(path)
    sys.modules[name] = module
    return module


def _numbers(value: Any, out: set[float]) -> None:
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, (int, float)):
        out.add(value)
    elif isinstance(value, tuple | list):  # NamedTuples too
        for item in value:
            _numbers(item, out)
    elif hasattr(value, "__dataclass_fields__"):
        for name in value.__dataclass_fields__:
            _numbers(getattr(value, name), out)


@cache
def _engine(root: Path, arch: str, env: tuple[tuple[str, str], ...] = ()) -> Engine:
    return Engine(_files(root), arch, dict(env))


def _files(root: Path) -> Path:
    """Where the release's ``sglang/`` package is under ``root``: a wheel's folder, or a checkout's ``python/``;
    ``OracleGap`` for a single file (the oracle runs the communicator modules, not a file alone)."""
    for base in (root, root / "python"):
        if (base / COMMUNICATOR).is_file():
            return base
    raise OracleGap(
        f"{root}: no {COMMUNICATOR} there: give an SGLang checkout or release (sglang:PATH to the folder, "
        "sglang==VERSION); the oracle runs SGLang's communicator modules, which a file alone does not hold"
    )


def _grid() -> list[int]:
    """16 B to 256 MiB: every power of two and the midpoints between them."""
    return sorted({p for k in range(4, 29) for p in (1 << k, 3 << (k - 1))} - {3 << 28})


#: the dtypes besides bf16 the probes ask in on one host, with their element size: SGLang's paths take fp16, bf16
#: and fp32 (its legacy kernel those only), so the engine's answer and artune's must agree for each
OTHER_DTYPES = (("float16", 2), ("float32", 4))


def probes(
    root: Path,
    archs: Iterable[str] = ARCHS,
    world_sizes: Iterable[int] = WORLD_SIZES,
    racks: Iterable[tuple[int, int, str]] = RACK_TOPOLOGIES,
    env: dict[str, str] | None = None,
) -> list[Probe]:
    """Every arch, world size 2-16 on one host and each of ``racks`` across hosts, both modes, multicast on
    and off: each bound (of the release as ``env`` sets it), +-1 and +-16 bytes around it, and the log grid."""
    out: list[Probe] = []
    topologies = [(ws, 1, "host") for ws in world_sizes] + list(racks)
    for arch in archs:
        engine = _engine(root, arch, tuple(sorted((env or {}).items())))
        for ws, hosts, nvlink in topologies:
            around = {b + d for b in engine.bounds(ws) for d in (-16, -1, 0, 1, 16)}
            sizes = sorted(s for s in around | set(_grid()) if s >= 0)
            for mode in MODES:
                for multicast in (True, False):
                    out += [Probe(arch, ws, mode, multicast, n, hosts=hosts, nvlink=nvlink) for n in sizes]
                    if hosts == 1:  # fp16 and fp32 on one host, at the sizes of whole elements
                        out += [
                            Probe(arch, ws, mode, multicast, n, dtype)
                            for dtype, size in OTHER_DTYPES
                            for n in sizes
                            if n % size == 0
                        ]
    return out


def engine_decisions(
    root: Path, probes: list[Probe], env: dict[str, str] | None = None, pcie: bool = False
) -> list[str]:
    """SGLang's own answer per probe, as artune's algorithm names (``env``: variables set, as ``Engine``, with
    each probe's own ``env`` over them; ``pcie``: on one host, GPUs without NVLink between every pair)."""
    groups: dict[tuple[Any, ...], list[int]] = {}
    for index, p in enumerate(probes):
        frozen = tuple(sorted({**(env or {}), **dict(p.env)}.items()))
        key = (p.arch, p.world_size, p.mode, p.multicast, p.hosts, p.nvlink, frozen, p.dtype)
        groups.setdefault(key, []).append(index)
    out = [""] * len(probes)
    for (arch, ws, mode, multicast, hosts, nvlink, frozen, dtype), indices in groups.items():
        sizes = [probes[i].nbytes for i in indices]
        engine = _engine(root, arch, frozen)
        answers = engine.decide(ws, multicast, mode, sizes, hosts, nvlink == "rack", not pcie, dtype)
        for i, answer in zip(indices, answers, strict=True):
            out[i] = answer
    return out


def artune_decisions(root: Path, probes: list[Probe], env: dict[str, str] | None = None) -> list[str]:
    """artune's answer per probe: the product's reader on the release, and ``decide`` (``env``: variables set,
    which the reader takes as the engine does). A ROCm probe is decided by the release's ``rocm`` tables alone
    under its own variables, as ``explain --arch gfx942 --env`` reads them."""
    if any(rocm.is_gfx(p.arch) or p.env for p in probes):  # each platform and setting read apart
        return _by_platform(root, probes, env)
    return _cuda_decisions(root, probes, env or {})


def _cuda_decisions(root: Path, probes: list[Probe], env: dict[str, str]) -> list[str]:
    """artune's answer per CUDA probe, read under ``env`` (the probes' own variables are in it)."""
    if not env:
        return read_decisions("sglang", root, probes)
    from artune.formats.sglang.read import read_sglang

    imported = read_sglang(str(root), env)
    return decide_all(imported.tables, probes, imported.findings)


def _by_platform(root: Path, probes: list[Probe], env: dict[str, str] | None) -> list[str]:
    from artune.formats.sglang.read import rocm_tables

    out: dict[int, str] = {}
    for variables, amd in dict.fromkeys((p.env, rocm.is_gfx(p.arch)) for p in probes):
        mine = [i for i, p in enumerate(probes) if p.env == variables and rocm.is_gfx(p.arch) == amd]
        chosen = [probes[i] for i in mine]
        if amd:
            reading = rocm_tables(str(_files(root)), {**(env or {}), **dict(variables)})
            answers = decide_all(reading.tables, chosen, reading.findings)
        else:
            answers = _cuda_decisions(root, chosen, {**(env or {}), **dict(variables)})
        out.update(zip(mine, answers, strict=True))
    return [out[i] for i in range(len(probes))]


#: SGLang's ROCm switches as the ROCm probes set them: every QuickReduce level (``QuickReduceRegime``'s members,
#: and INT3, which SGLang's regime lacks: it then builds no QuickReduce), AITER on and off, and the one-stage
#: switch unset, on, and off under deterministic inference (``is_set()`` wins over it), and deterministic
#: inference alone
QUICK_REDUCE_LEVELS = ("NONE", "FP", "INT8", "INT6", "INT4", "INT3")
AITER_SWITCH = {"on": (), "off": (("SGLANG_USE_AITER_AR", "0"),)}  # SGLANG_USE_AITER_AR: "true" by default
ONE_STAGE = (
    (),
    (("SGLANG_USE_1STAGE_ALLREDUCE", "1"),),
    (("SGLANG_ENABLE_DETERMINISTIC_INFERENCE", "1"),),
    (("SGLANG_ENABLE_DETERMINISTIC_INFERENCE", "1"), ("SGLANG_USE_1STAGE_ALLREDUCE", "0")),
)
ROCM_ARCHS = ("gfx942", "gfx950")


#: QuickReduce's own switches beside its level, each at one level with AITER off (where QuickReduce runs from
#: 16 MiB): the dtype's own rows (no bf16 cast), and a maximum of 32 MiB
QUICK_SWITCHES = (
    (("ROCM_QUICK_REDUCE_CAST_BF16_TO_FP16", "0"), ("ROCM_QUICK_REDUCE_QUANTIZATION", "FP")),
    (("ROCM_QUICK_REDUCE_MAX_SIZE_BYTES_MB", "32"), ("ROCM_QUICK_REDUCE_QUANTIZATION", "INT4")),
)


def rocm_envs() -> list[tuple[tuple[str, str], ...]]:
    """Every setting of the ROCm switches the probes take: each level with AITER on and off, one-stage unset;
    each one-stage setting with AITER on and off at no QuickReduce and at INT4; ``QUICK_SWITCHES``."""
    out = [(("ROCM_QUICK_REDUCE_QUANTIZATION", q), *a) for q in QUICK_REDUCE_LEVELS for a in AITER_SWITCH.values()]
    out += [
        (("ROCM_QUICK_REDUCE_QUANTIZATION", q), *a, *stage)
        for stage in ONE_STAGE[1:]
        for q in ("NONE", "INT4")
        for a in AITER_SWITCH.values()
    ]
    out += [(*switch, *AITER_SWITCH["off"]) for switch in QUICK_SWITCHES]
    return [tuple(sorted(e)) for e in out]


def rocm_probes(root: Path, archs: Iterable[str] = ROCM_ARCHS) -> list[Probe]:
    """For a release with SGLang's HIP path (``quick_all_reduce.py`` beside ``dispatch_custom_allreduce``): each
    AMD arch, one host (world sizes 2-16) and hosts over a network, both modes, every switch setting of
    ``rocm_envs``, at whole 16-byte rows around every ROCm bound (each row of QuickReduce's ``_QR_MIN_SIZE``,
    its maximum, AITER's, the legacy buffer) and on the log grid; no multicast (AMD GPUs have none)."""
    base = _files(root)
    if not (base / QUICK).is_file():
        return []
    engine = _engine(root, next(iter(archs), ROCM_ARCHS[0]))
    bounds = {QR_MAX_SIZE, AITER_MAX_SIZE, 8 * 1024 * 1024, 16 * 1024 * 1024}
    bounds |= {int(v) << 20 for e in rocm_envs() for k, v in e if k == "ROCM_QUICK_REDUCE_MAX_SIZE_BYTES_MB"}
    for row in (engine.quick or {}).get("QuickAllReduce", types.SimpleNamespace(_QR_MIN_SIZE={}))._QR_MIN_SIZE.values():
        bounds |= set(row)
    return grid_of_rocm_probes(rocm_envs(), list(archs), bounds, _grid())


#: where the probes under a switch's other value run: across hosts, every split of 8 and 16 ranks (and on one host
#: every world size 2-16)
SWITCH_RACKS: tuple[tuple[int, int, str], ...] = tuple(t for t in RACK_TOPOLOGIES if t[0] in (8, 16))


def switch_probes(root: Path) -> list[Probe]:
    """The probes under each setting of the switches SGLang's CUDA dispatch tests, at values other than their
    defaults (``artune.formats.sglang.read.tested``: its ``EnvBool`` variables, discovered from the evaluated
    code, not listed here), but those the oracle cannot run (``unprobed``). A sample beside the defaults' full
    grid: every arch, world sizes 2-16 on one host and ``SWITCH_RACKS`` across hosts, both modes, multicast on
    and off, bf16, at each bound of the release under the setting, 16 bytes either side, and each power of four
    from 16 B to 256 MiB."""
    out: list[Probe] = []
    for setting, gap in _switches(root):
        if gap:
            continue
        for arch in ARCHS:
            engine = _engine(root, arch, tuple(sorted(setting)))
            for ws, hosts, nvlink in [(ws, 1, "host") for ws in WORLD_SIZES] + list(SWITCH_RACKS):
                around = {b + d for b in engine.bounds(ws) for d in (-16, 0, 16)}
                sizes = sorted(n for n in around | {4**k for k in range(2, 15)} if n > 0)
                out += [
                    Probe(arch, ws, mode, multicast, n, hosts=hosts, nvlink=nvlink, env=setting)
                    for mode in MODES
                    for multicast in (True, False)
                    for n in sizes
                ]
    return out


def unprobed(root: Path) -> list[str]:
    """Each setting of switch values ``switch_probes`` leaves out, with what the oracle's stand-ins lack."""
    return [f"{' '.join(f'{n}={v}' for n, v in setting)}: {gap}" for setting, gap in _switches(root) if gap]


@cache
def _switches(root: Path) -> tuple[tuple[tuple[tuple[str, str], ...], str], ...]:
    """``(setting, gap)`` for each setting ``tested`` finds: ``gap`` what the oracle's stand-ins do not hold
    where the release runs under it (tried on one host and across hosts in a rack), else ""."""
    from artune.formats.sglang.read import tested

    out = []
    for setting in tested(str(_files(root))):
        gap = ""
        for arch, ws, hosts in (("9.0", 8, 1), ("10.0", 8, 2)):
            try:
                _engine(root, arch, tuple(sorted(setting))).decide(ws, True, "graph", [1 << 20], hosts, True, True)
            except OracleGap as err:
                gap = str(err)
                break
        out.append((setting, gap))
    return tuple(out)


def extra_probes(root: Path) -> list[Probe]:
    """The probes ``verify-engine`` adds to ``probes(root)``, which stays CUDA's at the defaults: the ROCm ones,
    and those under the switches' other values (``switch_probes``)."""
    return rocm_probes(root) + switch_probes(root)


def topology(probe: Probe) -> str:
    """A CUDA probe's topology (with its dtype where it is not bf16: ``1 host float32``; with the variables set
    where any are: ``1 host SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2=0``); a ROCm probe's with its arch (``1 host
    gfx942``)."""
    if rocm.is_gfx(probe.arch):
        return f"{probe.topology} {probe.arch}"
    setting = "".join(f" {name}={value}" for name, value in probe.env)
    return probe.topology + ("" if probe.dtype == "bfloat16" else f" {probe.dtype}") + setting


def evaluated(root: Path) -> list[Evaluated]:
    """The dispatch functions artune's reading of the release at ``root`` relies on, on CUDA and on ROCm (under
    every setting the ROCm probes take), fingerprinted: what ``--record`` keeps
    (``artune.formats.fingerprints.record``) once every probe agreed."""
    from artune.formats.sglang.read import evaluated as read_evaluated
    from artune.formats.sglang.read import rocm_evaluated

    found = read_evaluated(str(root))
    if (_files(root) / QUICK).is_file():  # and what the ROCm probes' readings ran, under each of their settings
        found += [e for env in rocm_envs() for e in rocm_evaluated(str(_files(root)), dict(env))]
    return sorted({(e.function, e.fingerprint): e for e in found}.values(), key=lambda e: e.function)


ORACLE = Oracle(
    runs="SGLang's own dispatch code (its communicator's Python, run on stand-ins for GPUs and kernels)",
    releases=RELEASES,
    probes=probes,
    engine_decisions=engine_decisions,
    artune_decisions=artune_decisions,
    extra_probes=extra_probes,
    unprobed=unprobed,
    topology=topology,
    evaluated=evaluated,
)


def main(argv: list[str]) -> int:
    """``python src/artune/oracles/sglang.py [--record] [VERSION...]``: per release, the probes, how many agree,
    what the engine ran, the findings ``artune check`` prints, and the first differences (exit 1 if any); with
    ``--record``, each release whose every probe agrees has its fingerprints kept (``verified.json``)."""
    from collections import Counter

    from artune.formats import fingerprints, read_engine
    from artune.formats.releases import fetch_release

    keep = "--record" in argv
    differ = 0
    for version in [a for a in argv if a != "--record"] or RELEASES:
        root = fetch_release("sglang", version)
        ps = probes(root)
        engine, ours = engine_decisions(root, ps), artune_decisions(root, ps)
        bad = [(p, e, a) for p, e, a in zip(ps, engine, ours, strict=True) if e != a]
        findings = Counter(f.severity for f in read_engine("sglang", str(root)).findings)
        ran = ", ".join(f"{name} {count}" for name, count in sorted(Counter(engine).items()))
        print(
            f"sglang=={version}: {len(ps)} probes, {len(ps) - len(bad)} equal; findings "
            f"{sum(findings.values())} ({', '.join(f'{k} {v}' for k, v in sorted(findings.items()))}); ran: {ran}"
        )
        for p, e, a in bad[:10]:
            print(f"  {p}: engine {e}, artune {a}")
        differ += bool(bad)
        if keep and not bad:
            print(f"  recorded in {fingerprints.record('sglang', version, evaluated(root))}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
