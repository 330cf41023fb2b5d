"""vLLM's own released code as the oracle: its communicators, built as vLLM builds them, decide each probe.

vLLM's modules import far too much (CUDA kernels, the compiler, the whole
engine) to import here. So the oracle runs the release's own source files,
unchanged, in a small stand-in world: ``cuda_communicator.py``,
``custom_all_reduce.py``, ``symm_mem.py``, ``all_reduce_utils.py`` (its
tables and ``should_nccl_symm_mem_allreduce``), ``base_device_communicator.py``,
``flashinfer_all_reduce.py``, ``pynccl_allocator.py`` and ``envs.py`` are
executed as modules whose imports an import hook answers. What they import
from the rest of vLLM, and the hardware they ask about, are stand-ins that
hold only what those files read: the platform (CUDA, the probe's compute
capability, fully NVLink-connected GPUs on each node, peer access works;
across hosts, the node count and ``in_the_same_node_as`` of the probe's
split, and peer memory, torch symmetric memory's rendezvous and FlashInfer's
workspaces mapping only within one NVLink domain, as ``Probe.nvlink`` says),
``torch.distributed`` for a group of the probe's world size, torch symmetric
memory (its rendezvous reports multicast as the probe says), FlashInfer
(installed, as vLLM's CUDA wheels require; its MNNVL workspace is
FlashInfer's own ``MNNVLAllReduceFusionWorkspace`` from the release vLLM
0.33.0 pins, flashinfer-python==0.7.2.post1, downloaded and cached like the
engines' wheels, so its three Lamport slots and ``is_buffer_size_sufficient``
run as released; it needs multicast, and peer memory in one NVLink domain;
the TRT-LLM workspace takes every problem that fits the one it was made for)
and vLLM's C++ ops (pointers that do nothing). ``envs.py`` runs as
released with no ``VLLM_*`` variable set, so every switch has the default
the release gives it, and ``parallel_state._ENABLE_CUSTOM_ALL_REDUCE`` has
its assigned value. ``PassConfig.default_fi_allreduce_fusion_max_size_mb``
is lifted out of ``config/compilation.py`` with ``ast`` and run on its own,
and the FlashInfer fusion file's table assignments are evaluated.

Then, per probe, vLLM's real ``CudaCommunicator(unique_name="tp:0")`` is
built as vLLM builds its tensor-parallel group's, and its real
``all_reduce`` runs on a bf16 input of the probe's size, whole rows of 16
bytes (shape ``(n / 16, 8)``: vLLM's hidden states are 2-D, FlashInfer
takes only 2-D inputs, vLLM 0.34 only rows of 16-byte multiples, and every
model's hidden size is a multiple of 8; with 16-byte rows the token bound is
exactly the byte bound). The
answer is what ran: ``custom_all_reduce`` (custom_ar),
``torch.ops.symm_mem.multimem_all_reduce_`` / ``two_shot_all_reduce_``,
FlashInfer's ``allreduce_fusion`` (flashinfer_ar), or pynccl / torch's
all-reduce (nccl). In graph mode the stream reports capturing and custom
all-reduce is inside its ``capture()``.

On ROCm probes (a gfx arch, and the probe's ``VLLM_*`` variables set for
``envs.py``) the platform is vLLM's ROCm one: ``is_rocm()``, torch's
``gcnArchName``, ``vllm.platforms.rocm``'s arch tests, custom all-reduce on the
MI300 series only, and ``quick_all_reduce.py`` and ``aiter_custom_all_reduce.py``
run as released, with AITER's own ``CustomAllreduce`` a stand-in (its facts in
``artune.formats.vllm.world``); what pynccl runs is RCCL there.

A release whose code asks the stand-ins something they do not hold fails
loudly (``Unknown``), never silently answering for vLLM.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import importlib
import math
import os
import types
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import torch

from artune import rocm
from artune.errors import OracleGap
from artune.formats.engine import Oracle
from artune.formats.fingerprints import Evaluated
from artune.formats.vllm.world import AITER_MAX_SIZE, AITER_WORLD_SIZES, QR_MAX_SIZE, QUICK_LEVELS
from artune.oracles import MODES, RAISES, ROW, TOPOLOGIES, Probe, decide_all
from artune.oracles import rocm_probes as grid_of_rocm_probes

# pip index versions vllm: every release from the first one with all_reduce_utils.py's size tables (0.10.2),
# and the three 0.10 releases before it, which have none (they run custom all-reduce below 8 MiB or nccl);
# 0.34.0 is the newest the registry lists
RELEASES: tuple[str, ...] = (
    "0.10.0",
    "0.10.1",
    "0.10.1.1",
    "0.10.2",
    "0.11.0",
    "0.11.1",
    "0.11.2",
    "0.12.0",
    "0.13.0",
    "0.14.0",
    "0.14.1",
    "0.15.0",
    "0.15.1",
    "0.16.0",
    "0.17.0",
    "0.17.1",
    "0.18.0",
    "0.18.1",
    "0.19.0",
    "0.19.1",
    "0.20.0",
    "0.20.1",
    "0.20.2",
    "0.21.0",
    "0.22.0",
    "0.22.1",
    "0.23.0",
    "0.24.0",
    "0.25.0",
    "0.25.1",
    "0.26.0",
    "0.27.0",
    "0.27.1",
    "0.28.0",
    "0.29.0",
    "0.30.0",
    "0.31.0",
    "0.32.0",
    "0.33.0",
    "0.34.0",
)
ARCHS = ("9.0", "10.0", "10.3", "10.7", "8.0")  # 8.0: an arch no vLLM table has a row for
WORLD_SIZES = tuple(range(2, 17))
MiB = 1 << 20
_COMM = "vllm/distributed/device_communicators/"
# the release's files that run as they are; every other vllm module is a stand-in
_REAL = {
    "vllm.envs": "vllm/envs.py",
    "vllm.distributed.device_communicators.cuda_communicator": _COMM + "cuda_communicator.py",
    "vllm.distributed.device_communicators.base_device_communicator": _COMM + "base_device_communicator.py",
    "vllm.distributed.device_communicators.custom_all_reduce": _COMM + "custom_all_reduce.py",
    "vllm.distributed.device_communicators.symm_mem": _COMM + "symm_mem.py",
    "vllm.distributed.device_communicators.all_reduce_utils": _COMM + "all_reduce_utils.py",
    "vllm.distributed.device_communicators.flashinfer_all_reduce": _COMM + "flashinfer_all_reduce.py",
    "vllm.distributed.device_communicators.pynccl_allocator": _COMM + "pynccl_allocator.py",
    # on ROCm only (on CUDA vLLM's defaults never build them: stand-ins that stop the oracle if they are)
    "vllm.distributed.device_communicators.quick_all_reduce": _COMM + "quick_all_reduce.py",
    "vllm.distributed.device_communicators.aiter_custom_all_reduce": _COMM + "aiter_custom_all_reduce.py",
}
# what a real module asks the hardware, answered for the probe's machine (peer access works between every pair)
_PROBED = {
    "vllm.distributed.device_communicators.all_reduce_utils": {"gpu_p2p_access_check": lambda src, tgt: True},
}
_FUSION_FILES = ("vllm/compilation/passes/fusion/allreduce_rms_fusion.py", "vllm/compilation/collective_fusion.py")


class Unknown:
    """What a stand-in module gives for a name it does not hold: usable in annotations, an error when used."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Unknown:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return Unknown(f"{self._name}.{attr}")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise OracleGap(f"the release called {self._name}(), which the oracle's stand-ins do not hold")

    def __bool__(self) -> bool:
        raise OracleGap(f"the release tested {self._name}, which the oracle's stand-ins do not hold")

    def __or__(self, other: Any) -> Unknown:  # "X | None" in an annotation
        return self

    __ror__ = __or__

    def __getitem__(self, item: Any) -> Unknown:  # "list[X]" in an annotation
        return self

    def __mro_entries__(self, bases: tuple[Any, ...]) -> tuple[type, ...]:
        return (object,)  # a class deriving from a stand-in name: its own methods are what runs


class StandIn(types.ModuleType):
    """A module of the stand-in world: the names given, ``Unknown`` for any other."""

    def __init__(self, name: str, **names: Any) -> None:
        super().__init__(name)
        self.__dict__.update(names)

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return Unknown(f"{self.__name__}.{attr}")


# ------------------------------------------------------------------ the machine the probe describes


class Capability(tuple):
    """vLLM's ``DeviceCapability``: ``as_version_str()`` and ``to_int()``."""

    @property
    def major(self) -> int:
        return self[0]

    @property
    def minor(self) -> int:
        return self[1]

    def as_version_str(self) -> str:
        return f"{self[0]}.{self[1]}"

    def to_int(self) -> int:
        return self[0] * 10 + self[1]


class CudaInput(torch.Tensor):
    """A tensor (of the probe's dtype) on the meta device that says it is on CUDA: a size and a dtype, no memory."""

    @property
    def is_cuda(self) -> bool:  # type: ignore[override]
        return True


def _tensor(nbytes: int, dtype: torch.dtype) -> torch.Tensor:
    size = torch.empty((), dtype=dtype).element_size()
    if nbytes % ROW:
        raise ValueError(f"{nbytes} bytes is not a whole number of {ROW}-byte rows")
    meta = torch.empty((nbytes // ROW, ROW // size), dtype=dtype, device="meta")
    return torch.Tensor._make_subclass(CudaInput, meta)


class World:
    """One process of vLLM's tensor-parallel group on the probe's machine, with the release's modules."""

    def __init__(
        self,
        root: Path,
        arch: str,
        world_size: int,
        multicast: bool,
        hosts: int = 1,
        nvlink: str = "host",
        env: tuple[tuple[str, str], ...] = (),
    ) -> None:
        self.root = root
        #: an AMD GPU by gfx arch: vLLM's ROCm platform, which reports HIP's capability (9.4 on gfx942)
        self.gfx = rocm.gfx_arch(arch) if rocm.is_gfx(arch) else ""
        facts = rocm.arch_facts(self.gfx) if self.gfx else None
        self.cdna = facts.cdna if facts is not None else None
        if self.gfx:
            arch = facts.capability if facts is not None else "0.0"
        self.environ = dict(env)  # the VLLM_* variables set; every other one unset
        self.process_group = "rccl" if self.gfx else "nccl"  # what pynccl and torch's nccl backend load
        major, minor = (int(x) for x in arch.split("."))
        self.capability = Capability((major, minor))
        self.world_size = world_size
        self.multicast = multicast
        if world_size % hosts:
            raise ValueError(f"world size {world_size} does not split evenly over {hosts} hosts")
        self.hosts = hosts
        # peer memory maps between hosts only when they share one NVLink domain (multi-node NVLink)
        self.one_domain = hosts == 1 or nvlink == "rack"
        self.capturing = False
        self.ran: list[str] = []
        self.modules: dict[str, types.ModuleType] = {}
        self._comm: Any = None
        self.group = _Group(world_size)
        self.torch = self._torch()
        self.stand_ins = self._stand_ins()

    # -- what ran

    def record(self, name: str) -> Callable[..., Any]:
        """A kernel launch: it notes that ``name`` ran, and returns its input as the result."""

        def run(*args: Any, **kwargs: Any) -> Any:
            self.ran.append(name)
            return args[0] if args else next(iter(kwargs.values()))

        return run

    # -- torch, with the device, the distributed group and the custom ops of the probe's machine

    def _torch(self) -> types.ModuleType:
        world = self

        def empty(*size: Any, **kwargs: Any) -> torch.Tensor:
            kwargs["device"] = "meta"
            return torch.empty(*size, **kwargs)

        def empty_like(t: torch.Tensor, **kwargs: Any) -> torch.Tensor:
            kwargs["device"] = "meta"
            return torch.empty_like(t, **kwargs)

        def zeros(*size: Any, **kwargs: Any) -> torch.Tensor:
            if kwargs.get("device", "cpu") != "cpu":
                kwargs["device"] = "meta"
            return torch.zeros(*size, **kwargs)

        class Handle:
            multicast_ptr = 1 if world.multicast else 0

            def get_buffer(self, *args: Any, **kwargs: Any) -> torch.Tensor:
                return torch.empty(args[1], dtype=args[2], device="meta")

        def rendezvous(buffer: Any, group_name: Any) -> Handle:
            if not world.one_domain:  # torch exchanges handles it cannot import from another NVLink domain
                raise RuntimeError("symmetric memory rendezvous: peer memory of another NVLink domain cannot map")
            return Handle()

        symm = StandIn(
            "torch.distributed._symmetric_memory",
            empty=lambda *size, dtype=None, device=None: torch.empty(*size, dtype=dtype, device="meta"),
            rendezvous=rendezvous,
        )
        dist = StandIn(
            "torch.distributed",
            ProcessGroup=torch.distributed.ProcessGroup,
            Backend=torch.distributed.Backend,
            ReduceOp=torch.distributed.ReduceOp,
            is_initialized=lambda: True,
            get_rank=lambda group=None: 0,
            get_world_size=lambda group=None: world.world_size,
            get_backend=lambda group=None: "gloo",
            get_process_group_ranks=lambda group: list(range(world.world_size)),
            get_group_rank=lambda group, rank: rank,
            all_gather=self._all_gather,
            all_gather_object=lambda out, obj, group=None: out.__setitem__(slice(None), [obj] * len(out)),
            broadcast_object_list=lambda objs, src=0, group=None, device=None: None,
            all_reduce=self._dist_all_reduce,
            barrier=lambda group=None: None,
            group=types.SimpleNamespace(WORLD=self.group),
            _symmetric_memory=symm,
            distributed_c10d=StandIn(
                "torch.distributed.distributed_c10d", _world=types.SimpleNamespace(pg_map={self.group: ("gloo", None)})
            ),
        )
        cuda = StandIn(
            "torch.cuda",
            is_available=lambda: True,
            device_count=lambda: world.world_size,
            current_device=lambda: 0,
            set_device=lambda device: None,
            get_device_capability=lambda device=None: tuple(world.capability),
            get_device_properties=lambda device=None: types.SimpleNamespace(
                gcnArchName=f"{world.gfx}:sramecc+:xnack-" if world.gfx else "", major=world.capability[0]
            ),
            is_current_stream_capturing=lambda: world.capturing,
            can_device_access_peer=lambda a, b: True,
            synchronize=lambda device=None: None,
            memory=torch.cuda.memory,
            Stream=torch.cuda.Stream,
        )
        ops = StandIn(
            "torch.ops",
            symm_mem=StandIn(
                "torch.ops.symm_mem",
                multimem_all_reduce_=self.record("symm_mem_multimem"),
                two_shot_all_reduce_=self.record("symm_mem_two_shot"),
                one_shot_all_reduce=self.record("symm_mem_one_shot"),
            ),
            vllm=StandIn("torch.ops.vllm", all_reduce_symmetric_with_copy=self.record("nccl_symmetric")),
        )
        accelerator = StandIn(
            "torch.accelerator", set_device_index=lambda index: None, synchronize=lambda device=None: None
        )
        first = StandIn(
            "torch", distributed=dist, cuda=cuda, ops=ops, accelerator=accelerator, empty=empty, empty_like=empty_like
        )
        first.zeros = zeros
        return _Overlay(first, torch)  # everything else is real torch

    def _all_gather(self, out: list[torch.Tensor], tensor: torch.Tensor, group: Any = None) -> None:
        for i, item in enumerate(out):  # rank i reports physical device i
            item.fill_(i)

    def _dist_all_reduce(self, tensor: torch.Tensor, op: Any = None, group: Any = None, async_op: bool = False) -> None:
        if tensor.device.type == "cpu":
            return  # a CPU agreement among ranks (every rank says the same here)
        self.ran.append(self.process_group)

    # -- the rest of vLLM

    def _stand_ins(self) -> dict[str, Any]:
        world = self
        per_host = self.world_size // self.hosts

        class StandInPlatform:
            device_type = "cuda"
            device_name = "cuda"

            def is_cuda(self) -> bool:
                return not world.gfx

            def is_cuda_alike(self) -> bool:
                return True

            def is_rocm(self) -> bool:
                return bool(world.gfx)

            def is_xpu(self) -> bool:
                return False

            def is_cpu(self) -> bool:
                return False

            def get_device_capability(self, device_id: int = 0) -> Capability:
                return world.capability

            def has_device_capability(self, capability: Any, device_id: int = 0) -> bool:
                want = capability if isinstance(capability, int) else capability[0] * 10 + capability[1]
                return world.capability.to_int() >= want

            def is_device_capability(self, capability: Any, device_id: int = 0) -> bool:
                want = capability if isinstance(capability, int) else capability[0] * 10 + capability[1]
                return world.capability.to_int() == want

            def is_device_capability_family(self, capability: int, device_id: int = 0) -> bool:
                return world.capability.to_int() // 10 == capability // 10

            def is_fully_connected(self, physical_device_ids: list[int]) -> bool:
                return True  # NVLink between every pair (NVSwitch); on AMD, XGMI between every pair of a node

            def device_count(self) -> int:
                return world.world_size

            def visible_device_id_to_physical_device_id(self, device_id: int) -> int:
                return device_id

            def logical_device_id_to_visible_device_id(self, device_id: int) -> int:
                return device_id

            def get_device_name(self, device_id: int = 0) -> str:
                return f"stand-in sm_{world.capability.to_int()}"

        class Logger:
            def __getattr__(self, name: str) -> Callable[..., None]:
                return lambda *args, **kwargs: None

        class Disabled:
            """A communicator vLLM's defaults do not build on CUDA: built anyway, the oracle stops."""

            def __init__(self, *args: Any, **kwargs: Any) -> None:
                raise OracleGap(
                    f"the release built {type(self).__name__} on CUDA, which the oracle's stand-ins do not hold"
                )

        class PyNccl:
            def __init__(self, group: Any, device: Any) -> None:
                self.world_size = world.world_size
                self.disabled = False
                self.all_reduce = world.record(world.process_group)

        class Ops(StandIn):
            def __getattr__(self, attr: str) -> Any:
                if attr.startswith("__"):
                    raise AttributeError(attr)
                return lambda *args, **kwargs: 0  # vLLM's C++ ops: pointers and handles nobody reads

        ops = Ops("vllm._custom_ops")
        ops.allocate_shared_buffer_and_handle = lambda size: (0, b"")
        ops.get_graph_buffer_ipc_meta = lambda ptr: ([], [])
        ops.meta_size = lambda: 0
        ops.qr_max_size = lambda: QR_MAX_SIZE

        def quick_reduce(ptr: Any, inp: Any, out: Any, level: int, *args: Any) -> Any:
            return world.record(QUICK_LEVELS[level])(inp)

        ops.qr_all_reduce = quick_reduce

        class StandInWorkspace:
            def __init__(self, backend: str, max_token_num: int, hidden_dim: int, dtype: torch.dtype) -> None:
                self.backend = backend
                self.mc_ptr = 1
                self.capacity = max_token_num * hidden_dim

            def is_buffer_size_sufficient(
                self, tp_size: int, num_tokens: int, hidden_dim: int, dtype: Any, *a: Any, **k: Any
            ) -> bool:
                return num_tokens * hidden_dim <= self.capacity

            def destroy(self) -> None:
                pass

        def create_workspace(
            backend: str = "auto",
            world_size: int = 0,
            rank: int = 0,
            max_token_num: int = 0,
            hidden_dim: int = 0,
            dtype: Any = None,
            **kwargs: Any,
        ) -> Any:
            if backend == "mnnvl" and not world.multicast:
                raise RuntimeError("Multicast pointer is null after rendezvous (no NVLink multicast)")
            if not world.one_domain:  # mnnvl's fabric handles, trtllm's IPC: neither maps across a network
                raise RuntimeError(f"{backend} workspace: peer memory of another NVLink domain cannot map")
            if backend == "mnnvl":  # FlashInfer's own class: its Lamport slots and its is_buffer_size_sufficient
                mapping = types.SimpleNamespace(world_size=world_size, rank=rank, tp_size=world_size, tp_rank=rank)
                return mnnvl_workspace()(mapping, max_token_num, hidden_dim, dtype, comm_backend=_Barrier())
            return StandInWorkspace(backend, max_token_num, hidden_dim, dtype)

        flashinfer_comm = StandIn(
            "flashinfer.comm",
            allreduce_fusion=world.record("flashinfer_ar"),
            create_allreduce_fusion_workspace=create_workspace,
            AllReduceFusionPattern=types.SimpleNamespace(kAllReduce=0),
            mnnvl=StandIn("flashinfer.comm.mnnvl", TorchDistBackend=lambda group=None: None),
        )
        flashinfer = StandIn("flashinfer", comm=flashinfer_comm)
        return {
            "vllm.platforms": StandIn("vllm.platforms", current_platform=StandInPlatform()),
            "vllm.logger": StandIn("vllm.logger", init_logger=lambda name: Logger(), logger=Logger()),
            "vllm._custom_ops": ops,
            "vllm.config": StandIn(
                "vllm.config", get_current_vllm_config_or_none=lambda: None, get_current_vllm_config=lambda: None
            ),
            "vllm.config.compilation": StandIn("vllm.config.compilation", PassConfig=self._pass_config()),
            "vllm._aiter_ops": StandIn(
                "vllm._aiter_ops",
                rocm_aiter_ops=types.SimpleNamespace(is_custom_all_reduce_enabled=lambda: False),
            ),
            "vllm.distributed.parallel_state": StandIn(
                "vllm.distributed.parallel_state",
                # ParallelConfig turns the platform's use_custom_allreduce() into it: on ROCm the MI300 series only
                # (RocmPlatform.use_custom_allreduce, vllm/platforms/rocm.py: gfx94*, gfx95*)
                _ENABLE_CUSTOM_ALL_REDUCE=self._assigned(
                    "vllm/distributed/parallel_state.py", "_ENABLE_CUSTOM_ALL_REDUCE"
                )
                and (not self.gfx or self.gfx.startswith(("gfx94", "gfx95"))),
                in_the_same_node_as=lambda group, source_rank=0: [
                    rank // per_host == source_rank // per_host for rank in range(world.world_size)
                ],
                _node_count=lambda group=None: world.hosts,
                get_node_count=lambda: world.hosts,
            ),
            "vllm.distributed.utils": StandIn(
                "vllm.distributed.utils",
                StatelessProcessGroup=Unknown("vllm.distributed.utils.StatelessProcessGroup"),
                is_weak_contiguous=lambda t: t.is_contiguous(),
            ),
            "vllm.distributed.device_communicators.pynccl": StandIn(
                "vllm.distributed.device_communicators.pynccl",
                PyNcclCommunicator=PyNccl,
                register_nccl_symmetric_ops=lambda comm: None,
            ),
            **(
                self._rocm_stand_ins()
                if self.gfx
                else {
                    "vllm.distributed.device_communicators.quick_all_reduce": StandIn(
                        "quick_all_reduce", QuickAllReduce=type("QuickAllReduce", (Disabled,), {})
                    ),
                    "vllm.distributed.device_communicators.aiter_custom_all_reduce": StandIn(
                        "aiter_custom_all_reduce", AiterCustomAllreduce=type("AiterCustomAllreduce", (Disabled,), {})
                    ),
                }
            ),
            "vllm.distributed.device_communicators.flashinfer_pcie_ipc_all_reduce": StandIn(
                "flashinfer_pcie_ipc_all_reduce",
                FlashInferPcieIpcAllReduce=type("FlashInferPcieIpcAllReduce", (Disabled,), {}),
            ),
            # vLLM 0.11-0.18 read VLLM_BATCH_INVARIANT here; unset, as every variable is
            "vllm.model_executor.layers.batch_invariant": StandIn(
                "batch_invariant", vllm_is_batch_invariant=lambda: False
            ),
            "vllm.utils": StandIn("vllm.utils", cuda_device_count_stateless=lambda: world.world_size),
            "vllm.utils.torch_utils": StandIn(
                "vllm.utils.torch_utils", cuda_device_count_stateless=lambda: world.world_size
            ),
            "vllm.distributed.device_communicators.custom_all_reduce_utils": StandIn(
                "custom_all_reduce_utils", gpu_p2p_access_check=lambda src, tgt: True
            ),
            "vllm.utils.gpu_sync_debug": StandIn(
                "gpu_sync_debug", gpu_sync_allowed=lambda *a, **k: contextlib.nullcontext()
            ),
            "vllm.compilation.passes.fusion.allreduce_rms_fusion": self._fusion_tables(),
            "flashinfer": flashinfer,
            "flashinfer.comm": flashinfer_comm,
            "flashinfer.comm.mnnvl": flashinfer_comm.mnnvl,
        }

    def _assigned(self, rel: str, name: str) -> Any:
        """The value a release's file assigns to ``name`` at its top level (a constant)."""
        tree = _tree(self.root / rel)
        for node in tree.body if tree is not None else ():
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
                return ast.literal_eval(node.value)
        raise OracleGap(f"{rel} assigns no {name}")

    def _fusion_tables(self) -> types.ModuleType:
        """The FlashInfer fusion file's top-level table assignments, evaluated in order (others left out)."""
        module = StandIn("vllm.compilation.passes.fusion.allreduce_rms_fusion")
        for rel in _FUSION_FILES:
            tree = _tree(self.root / rel)
            for node in tree.body if tree is not None else ():
                if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                    target = node.targets[0] if isinstance(node, ast.Assign) else node.target
                    if isinstance(target, ast.Name):
                        with contextlib.suppress(Exception):
                            value = eval(compile(ast.Expression(node.value), rel, "eval"), {}, module.__dict__)
                            module.__dict__[target.id] = value
            if tree is not None:
                break
        return module

    def _pass_config(self) -> type:
        """``PassConfig`` with the release's own ``default_fi_allreduce_fusion_max_size_mb``, lifted alone."""
        tree = _tree(self.root / "vllm/config/compilation.py")
        for node in ast.walk(tree) if tree is not None else ():
            if isinstance(node, ast.FunctionDef) and node.name == "default_fi_allreduce_fusion_max_size_mb":
                node = ast.FunctionDef(**{**node.__dict__, "decorator_list": []})
                namespace = self._namespace("vllm.config.compilation")
                exec(compile(ast.Module([node], []), "vllm/config/compilation.py", "exec"), namespace)
                return type("PassConfig", (), {node.name: staticmethod(namespace[node.name])})
        return Unknown("vllm.config.compilation.PassConfig")  # type: ignore[return-value]

    # -- ROCm

    def _rocm_stand_ins(self) -> dict[str, Any]:
        """What vLLM asks on an AMD GPU: ``vllm.platforms.rocm``'s arch tests, ``rocm_aiter_ops`` (AITER is
        installed; its custom all-reduce is on where the release's envs.py says both switches are) and AITER's
        own ``CustomAllreduce`` (``AITER_WORLD_SIZES``, ``AITER_MAX_SIZE``; its kernel is recorded)."""
        world = self

        def on(*prefixes: str) -> Callable[[], bool]:
            return lambda: world.gfx.startswith(prefixes)

        on_gfx9 = on("gfx90a", "gfx942", "gfx950")

        def aiter_enabled() -> bool:
            envs = world.module("vllm.envs")
            return on_gfx9() and bool(envs.VLLM_ROCM_USE_AITER) and bool(envs.VLLM_ROCM_USE_AITER_CUSTOM_AR)

        class AiterCustomAllreduce:
            def __init__(self, group: Any, device: Any, max_size: int = 0, **kwargs: Any) -> None:
                self.disabled = world.world_size not in AITER_WORLD_SIZES or world.hosts > 1
                self.fully_connected = True
                self.max_size = max_size

            def should_custom_ar(self, inp: torch.Tensor, *args: Any) -> bool:
                size = inp.numel() * inp.element_size()
                return not self.disabled and size % 16 == 0 and size <= AITER_MAX_SIZE

            def custom_all_reduce(self, inp: torch.Tensor) -> torch.Tensor:
                return world.record("aiter_ar")(inp)

            def capture(self) -> Any:
                return contextlib.nullcontext()

        aiter_ops = types.SimpleNamespace(
            is_custom_all_reduce_enabled=aiter_enabled, is_flydsl_quick_reduce_available=lambda: False
        )
        return {
            "vllm._aiter_ops": StandIn("vllm._aiter_ops", rocm_aiter_ops=aiter_ops),
            "vllm.platforms.rocm": StandIn(
                "vllm.platforms.rocm",
                on_gfx9=on_gfx9,
                on_mi3xx=on("gfx942", "gfx950"),
                on_gfx942=on("gfx942"),
                on_gfx950=on("gfx950"),
                on_gfx1250=on("gfx1250"),
                get_cdna_version=lambda: world.cdna,
            ),
            "aiter.dist.device_communicators.custom_all_reduce": StandIn(
                "aiter.dist.device_communicators.custom_all_reduce", CustomAllreduce=AiterCustomAllreduce
            ),
        }

    # -- the import hook

    def _namespace(self, name: str) -> dict[str, Any]:
        package = name.rpartition(".")[0]
        hooked = {**builtins.__dict__, "__import__": self._import}
        return {"__name__": name, "__package__": package, "__builtins__": hooked}

    def _import(self, name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0) -> Any:
        if level:
            package = (globals or {}).get("__package__", "").split(".")
            base = ".".join(package[: len(package) - level + 1])
            name = f"{base}.{name}" if name else base
        if name in ("os",) and (globals or {}).get("__name__") == "vllm.envs":
            return _Environ(self.environ)  # envs.py reads the probe's VLLM_* variables: every other at its default
        top = name.split(".")[0]
        if top not in ("torch", "vllm", "flashinfer", "aiter"):
            return builtins.__import__(name, globals, locals, fromlist or (), 0)
        if not fromlist:
            self.module(name)  # "import a.b as c" runs a.b, then walks attributes from the top
            return self.module(top)
        return self.module(name)

    def module(self, name: str) -> Any:
        """The stand-in world's module ``name``: the release's file run here, a stand-in, or a package."""
        if name in self.modules:
            return self.modules[name]
        if name == "torch" or name.startswith("torch."):
            parts = name.split(".")
            if len(parts) > 1 and parts[1] not in self.torch.__dict__:
                return importlib.import_module(name)  # a part of torch the probe's machine does not change
            found: Any = self.torch
            for part in parts[1:]:
                found = getattr(found, part)
            return found
        if name in self.stand_ins:
            module = self.stand_ins[name]
        elif name in _REAL and (self.root / _REAL[name]).is_file():
            module = types.ModuleType(name)
            module.__dict__.update(self._namespace(name))
            self.modules[name] = module  # before running it: its imports may come back to it
            exec(_code(self.root / _REAL[name]), module.__dict__)
            module.__dict__.update(_PROBED.get(name, {}))
            if name.endswith(".custom_all_reduce") and "_has_local_multicast_support" in module.__dict__:
                # torch's _SymmetricMemory.has_multicast_support(CUDA, device): what the probe's GPU says
                module.__dict__["_has_local_multicast_support"] = lambda device: self.multicast
            return module
        else:
            module = _Package(name, self)
        self.modules[name] = module
        return module

    # -- vLLM's tensor-parallel communicator, and one call

    def communicator(self) -> Any:
        """vLLM's CudaCommunicator for the group, built once (one per process, as in vLLM)."""
        if self._comm is not None:
            return self._comm
        cuda = self.module("vllm.distributed.device_communicators.cuda_communicator")
        custom = self.module("vllm.distributed.device_communicators.custom_all_reduce")
        # the kernel's launch, not its choice: should_custom_ar has decided by the time this runs
        custom.CustomAllreduce.custom_all_reduce = lambda comm, inp: self.record("custom_ar")(inp)
        device = torch.device("cuda:0")
        self._comm = cuda.CudaCommunicator(self.group, device=device, device_group=self.group, unique_name="tp:0")
        return self._comm

    def all_reduce(self, nbytes: int, mode: str, dtype: torch.dtype = torch.bfloat16) -> str:
        comm = self.communicator()
        self.ran.clear()
        self.capturing = mode == "graph"
        ca = getattr(comm, "ca_comm", None)
        context = ca.capture() if self.capturing and ca is not None else contextlib.nullcontext()
        with context:
            comm.all_reduce(_tensor(nbytes, dtype))
        self.capturing = False
        if len(self.ran) != 1:
            raise OracleGap(f"one all-reduce ran {self.ran or 'nothing'}")
        return self.ran[0]


class _Group:
    """The tensor-parallel group's process group, as vLLM's code asks it."""

    group_name = "tp:0"

    def __init__(self, world_size: int) -> None:
        self.world_size = world_size

    def rank(self) -> int:
        return 0

    def size(self) -> int:
        return self.world_size


class _Overlay(types.ModuleType):
    """The stand-in names first, then the real module's."""

    def __init__(self, first: types.ModuleType, then: types.ModuleType) -> None:
        super().__init__(first.__name__)
        self.__dict__.update({k: v for k, v in first.__dict__.items() if not k.startswith("__")})
        self._then = then

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._then, attr)


class _Package(types.ModuleType):
    """A vllm package or module the oracle does not hold: its children resolve through the world."""

    def __init__(self, name: str, world: World) -> None:
        super().__init__(name)
        self._world = world

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        child = f"{self.__name__}.{attr}"
        if any(k == child or k.startswith(child + ".") for k in (*self._world.stand_ins, *_REAL)):
            return self._world.module(child)
        return Unknown(child)


class _Environ(types.ModuleType):
    """``os`` for envs.py: the real module with an environment of only the probe's variables."""

    def __init__(self, environ: dict[str, str] | None = None) -> None:
        super().__init__("os")
        self.environ: dict[str, str] = dict(environ or {})

    def getenv(self, key: str, default: Any = None) -> Any:
        return self.environ.get(key, default)

    def __getattr__(self, attr: str) -> Any:
        return getattr(os, attr)


@cache
def _tree(path: Path) -> ast.Module | None:
    return ast.parse(path.read_text(), str(path)) if path.is_file() else None


@cache
def _code(path: Path) -> types.CodeType:
    return compile(path.read_text(), str(path), "exec")


# ------------------------------------------------------------------ FlashInfer's MNNVL workspace

#: the FlashInfer release whose MNNVL workspace the oracle runs: the one vLLM 0.33.0 pins
#: (flashinfer-python==0.7.2.post1), the first vLLM to run FlashInfer's mnnvl all-reduce across hosts
#: with the node-keyed bounds read as they are now
FLASHINFER = "0.7.2.post1"
_FI_COMM = "flashinfer/comm/"


class _Barrier:
    """FlashInfer's ``CommBackend`` for one process of the group: the barrier every rank reaches."""

    def barrier(self) -> None:
        pass


class _McastBuffer:
    """FlashInfer's ``McastGPUBuffer`` (``flashinfer/comm/mnnvl.py``): a multicast buffer of exactly the size
    asked. The real one rounds the size up to the driver's multicast granularity, which only makes each
    Lamport slot larger; the size a call needs is FlashInfer's own arithmetic, run as released."""

    def __init__(self, buf_size: int, group_size: int, group_rank: int, device: Any, **kwargs: Any) -> None:
        self.buf_size = buf_size
        self.mcast_device_memory = types.SimpleNamespace(get_buffer_ptrs_host=lambda: [0] * group_size)

    def lamport_initialize(self, rank: int, dtype: Any) -> None:
        pass

    def get_buffer_ptrs_dev(self) -> int:
        return 0

    def get_unicast_ptr(self, rank: int) -> int:
        return 0

    def get_multicast_ptr(self) -> int:
        return 1  # the world without multicast, or across a network, never gets here (create_workspace)


@cache
def mnnvl_workspace() -> type:
    """FlashInfer's ``MNNVLAllReduceFusionWorkspace``, lifted from the release vLLM pins (``FLASHINFER``,
    downloaded once like the engines' wheels) with its base class, ``round_up`` and the one-shot threshold;
    its allocation on a GPU is a stand-in (``_McastBuffer``)."""
    from artune.formats.releases import fetch_release

    root = fetch_release("flashinfer-python", FLASHINFER)
    namespace: dict[str, Any] = {"__name__": "flashinfer.comm.trtllm_mnnvl_ar"}
    exec(_code(root / (_FI_COMM + "workspace_base.py")), namespace)  # imports only warnings, abc, typing, torch
    cuda = StandIn(
        "torch.cuda", current_device=lambda: 0, synchronize=lambda device=None: None, is_available=lambda: True
    )

    def tensor(data: Any, *args: Any, **kwargs: Any) -> torch.Tensor:
        if kwargs.get("device") is not None and str(kwargs["device"]).startswith("cuda"):
            kwargs["device"] = "meta"
        return torch.tensor(data, *args, **kwargs)

    namespace.update(
        torch=_Overlay(StandIn("torch", cuda=cuda, tensor=tensor), torch),
        Mapping=object,
        CommBackend=object,
        MPIBackend=_Barrier,
        McastGPUBuffer=_McastBuffer,
        SymmDeviceMemory=type("SymmDeviceMemory", (), {}),
        functools=__import__("functools"),
        math=math,
        logging=__import__("logging"),
        Optional=Any,
        flashinfer_api=lambda func: func,  # FlashInfer's API logging decorator: it logs, and returns func
    )
    wanted = {"round_up"}
    for node in (_tree(root / (_FI_COMM + "mnnvl.py")) or ast.Module([], [])).body:
        if isinstance(node, ast.FunctionDef) and node.name in wanted:
            exec(compile(ast.Module([node], []), str(root / (_FI_COMM + "mnnvl.py")), "exec"), namespace)
    names = {"MNNVLAllreduceFusionStrategy", "MNNVL_ONE_SHOT_THRESHOLD", "MNNVLAllReduceFusionWorkspace"}
    path = root / (_FI_COMM + "trtllm_mnnvl_ar.py")
    for node in (_tree(path) or ast.Module([], [])).body:
        if isinstance(node, ast.ClassDef) and node.name == "MNNVLAllreduceFusionStrategy":
            namespace["Enum"] = __import__("enum").Enum
        named = (
            {node.name}
            if isinstance(node, ast.ClassDef)
            else {t.id for t in getattr(node, "targets", ()) if isinstance(t, ast.Name)}
        )
        if named & names:
            exec(compile(ast.Module([node], []), str(path), "exec"), namespace)
    if "MNNVLAllReduceFusionWorkspace" not in namespace or "round_up" not in namespace:
        raise OracleGap(f"flashinfer-python {FLASHINFER}: no MNNVLAllReduceFusionWorkspace or round_up where read")
    return namespace["MNNVLAllReduceFusionWorkspace"]


# ------------------------------------------------------------------ the interface


def _bounds(root: Path) -> set[int]:
    """Every size bound the release's tables and code hold, evaluated by the oracle itself."""
    world = World(root, "9.0", 2, True)
    out = {8 * MiB}
    utils = (
        world.module("vllm.distributed.device_communicators.all_reduce_utils")
        if (root / _REAL["vllm.distributed.device_communicators.all_reduce_utils"]).is_file()
        else None
    )
    for name in ("CUSTOM_ALL_REDUCE_MAX_SIZES", "SYMM_MEM_ALL_REDUCE_MAX_SIZES"):
        for rows in getattr(utils, name, {}).values() if utils is not None else ():
            out |= set(rows.values())
    for mb in (getattr(utils, "FI_MNNVL_ALLREDUCE_MAX_SIZE_MB", {}) if utils is not None else {}).values():
        out |= {int(mb * MiB), int(mb * MiB) - 1}
    fusion = world.stand_ins["vllm.compilation.passes.fusion.allreduce_rms_fusion"]
    for rows in fusion.__dict__.get("FI_ALLREDUCE_FUSION_MAX_SIZE_MB", {}).values():
        out |= {int(mb * MiB) for mb in rows.values() if mb}
    return out


def _grid() -> list[int]:
    """16 B to 256 MiB: each power of two and the point halfway between it and the next, on a log scale."""
    out: list[int] = []
    for exp in range(4, 29):
        out += [1 << exp, round(math.sqrt(2) * (1 << exp)) & ~1]
    return [n for n in out if n <= 256 * MiB]


#: the message dtypes the probes ask in: bf16 (what serving reduces) on every topology, and fp16 and fp32, which
#: vLLM's paths tell apart (symmetric memory takes bf16 only; a bound may depend on the dtype), on one host
DTYPES = ("bfloat16", "float16", "float32")


def probes(root: Path, racks: bool = True) -> list[Probe]:
    """Every arch, each of ``TOPOLOGIES`` (one host only, without ``racks``), both modes, multicast on and
    off, at the whole rows around every bound and on a log grid (a message is whole rows of ``ROW`` bytes, as
    every model's hidden states are), in bf16; on one host in each of ``DTYPES``."""
    sizes = {n // ROW * ROW for n in _grid()}
    for bound in _bounds(root):
        below = bound // ROW * ROW
        sizes |= {below - ROW, below, below + ROW, below + 2 * ROW}
    sizes = sorted(n for n in sizes if n > 0)
    topologies = [t for t in TOPOLOGIES if racks or t[1] == 1]
    return [
        Probe(arch, ws, mode, multicast, n, dtype, hosts=hosts, nvlink=nvlink)
        for dtype in DTYPES
        for arch in ARCHS
        for ws, hosts, nvlink in topologies
        if dtype == "bfloat16" or hosts == 1
        for multicast in (True, False)
        for mode in MODES
        for n in sizes
    ] + rocm_probes(root)


#: where the probes under a switch's other value run: one host (world sizes 2-16) and every split of 8 and 16 ranks
#: over hosts, in one NVLink domain and over a network
SWITCH_TOPOLOGIES: tuple[tuple[int, int, str], ...] = tuple(t for t in TOPOLOGIES if t[1] == 1 or t[0] in (8, 16))


def switch_probes(root: Path) -> list[Probe]:
    """The probes under each value other than the default of each switch the release's dispatch tests on CUDA
    (``artune.formats.vllm.switches.tested``: its ``bool`` and ``Literal`` variables, discovered from the
    evaluated code, not listed here), each setting ``tested`` gives, but those the oracle cannot run
    (``unprobed``). A sample beside the defaults' full grid: every arch, ``SWITCH_TOPOLOGIES``, both modes,
    multicast on and off, bf16, at the whole rows either side of every bound (``_bounds``) and each power of four
    from 16 B to 256 MiB."""
    settings = [setting for setting, gap in _switches(root) if not gap]
    if not settings:
        return []
    sizes = {4**k for k in range(2, 15)}
    for bound in _bounds(root):
        below = bound // ROW * ROW
        sizes |= {below, below + ROW}
    return [
        Probe(arch, ws, mode, multicast, n, hosts=hosts, nvlink=nvlink, env=setting)
        for setting in settings
        for arch in ARCHS
        for ws, hosts, nvlink in SWITCH_TOPOLOGIES
        for multicast in (True, False)
        for mode in MODES
        for n in sorted(s for s in sizes if s > 0)
    ]


def extra_probes(root: Path) -> list[Probe]:
    """What ``verify-engine`` probes beside ``probes(root)``: the switches' other values (``switch_probes``)."""
    return switch_probes(root)


def unprobed(root: Path) -> list[str]:
    """Each switch value the release's dispatch tests that ``switch_probes`` leaves out, with why: the release
    then builds what the oracle's stand-ins do not hold (``FlashInferPcieIpcAllReduce``, whose workspace vLLM's
    worker tunes and prepares for its graph-capture sizes outside the communicator)."""
    return [f"{' '.join(f'{n}={v}' for n, v in setting)}: {gap}" for setting, gap in _switches(root) if gap]


@cache
def _switches(root: Path) -> tuple[tuple[tuple[tuple[str, str], ...], str], ...]:
    """``(setting, gap)`` for each setting of switch values ``tested`` finds: ``gap`` what the oracle's
    stand-ins do not hold where the release runs under it (tried on one host and across hosts in a rack)."""
    from artune.formats.vllm.switches import tested

    out = []
    for setting in tested(str(root)):
        gap = ""
        for arch, ws, hosts, nvlink in (("9.0", 2, 1, "host"), ("10.0", 8, 2, "rack")):
            try:
                World(root, arch, ws, True, hosts, nvlink, setting).all_reduce(1 << 20, "graph")
            except OracleGap as err:
                gap = str(err)
                break
            except Exception:  # the release's own raise: an answer the probes compare
                continue
        out.append((setting, gap))
    return tuple(out)


#: the AMD archs the ROCm probes run on (QuickReduce's arch check admits gfx94* and gfx95*; gfx90a is CDNA2)
ROCM_ARCHS = ("gfx942", "gfx950", "gfx90a")
#: every value of ``VLLM_ROCM_QUICK_REDUCE_QUANTIZATION`` (``QuickReduceRegime``'s members; INT3 from the
#: release that added it, an unknown level to older ones, which then run no QuickReduce)
QUICK_REDUCE_LEVELS = ("FP", "INT8", "INT6", "INT4", "INT3", "NONE")
#: AITER's custom all-reduce on (both of vLLM's switches) and off (``VLLM_ROCM_USE_AITER`` unset, its default)
AITER = {"on": (("VLLM_ROCM_USE_AITER", "1"),), "off": ()}


def _rocm_envs() -> list[tuple[tuple[str, str], ...]]:
    return [
        (("VLLM_ROCM_QUICK_REDUCE_QUANTIZATION", level), *aiter)
        for level in QUICK_REDUCE_LEVELS
        for aiter in AITER.values()
    ]


def _rocm_bounds(root: Path) -> set[int]:
    """QuickReduce's minimum sizes (every row of ``_QR_MIN_SIZE``) and maximum, AITER's bound, custom
    all-reduce's buffer: where a ROCm answer can change."""
    world = World(root, "gfx942", 2, False)
    out = {8 * MiB, QR_MAX_SIZE, AITER_MAX_SIZE}
    qr = world.module("vllm.distributed.device_communicators.quick_all_reduce")
    for row in getattr(getattr(qr, "QuickAllReduce", None), "_QR_MIN_SIZE", {}).values():
        out |= set(row)
    return out


def rocm_probes(root: Path) -> list[Probe]:
    """For a release with ``quick_all_reduce.py``: each ROCm arch, one host (world sizes 2-16) and hosts over a
    network, both modes, every QuickReduce level with AITER on and off, around every ROCm bound and on the grid
    (bf16, as serving reduces; no multicast on AMD GPUs)."""
    if not (root / _REAL["vllm.distributed.device_communicators.quick_all_reduce"]).is_file():
        return []
    return grid_of_rocm_probes(_rocm_envs(), ROCM_ARCHS, _rocm_bounds(root), _grid())


def topology(probe: Probe) -> str:
    """A CUDA probe's topology (with its dtype where it is not bf16: ``1 host float32``; with the variable set
    where one is: ``1 host VLLM_BATCH_INVARIANT=1``); a ROCm probe's with its arch and its switches (``1 host
    gfx942 QR=INT8 AITER=on``)."""
    if not rocm.is_gfx(probe.arch):
        setting = "".join(f" {name}={value}" for name, value in probe.env)
        return probe.topology + ("" if probe.dtype == "bfloat16" else f" {probe.dtype}") + setting
    env = dict(probe.env)
    level = env.get("VLLM_ROCM_QUICK_REDUCE_QUANTIZATION", "NONE")
    return f"{probe.topology} {probe.arch} QR={level} AITER={'on' if env.get('VLLM_ROCM_USE_AITER') else 'off'}"


def _dtype(name: str) -> torch.dtype:
    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"unknown dtype {name!r}")
    return dtype


def engine_decisions(root: Path, probes: list[Probe]) -> list[str]:
    """vLLM's own answer per probe: what its CudaCommunicator.all_reduce ran, or ``RAISES`` where building
    the communicator or the all-reduce raises (a release that does not catch what the machine's set-up
    raises, or whose own code raises: a ``KeyError`` on a table, a failed ``assert``)."""
    worlds: dict[tuple[Any, ...], World | None] = {}
    out: list[str] = []
    for probe in probes:
        key = (probe.arch, probe.world_size, probe.multicast, probe.hosts, probe.nvlink, probe.env)
        if key not in worlds:
            world = World(root, *key)
            try:
                world.communicator()
            except Exception as err:  # not OracleGap: what the release itself lets through
                if not _releases_own(err, root, (RuntimeError, ValueError)):
                    raise
                world = None
            worlds[key] = world
        world = worlds[key]
        if world is None:
            out.append(RAISES)
            continue
        try:
            out.append(world.all_reduce(probe.nbytes, probe.mode, _dtype(probe.dtype)))
        except Exception as err:
            if not _releases_own(err, root):
                raise
            out.append(RAISES)
    return out


def _releases_own(err: Exception, root: Path, let_through: tuple[type[Exception], ...] = ()) -> bool:
    """Whether ``err`` is the release's own answer: raised in one of its files (a ``KeyError`` on a table, a
    failed ``assert``), or one of ``let_through`` that a stand-in raised as the machine would (a rendezvous
    across NVLink domains) and the release does not catch. Never ``OracleGap``: a question the stand-ins
    cannot answer is the oracle's gap, not vLLM's raise."""
    if isinstance(err, OracleGap):
        return False
    if isinstance(err, let_through):
        return True
    frame = err.__traceback__
    while frame is not None and frame.tb_next is not None:
        frame = frame.tb_next
    if frame is None:
        return False
    where = Path(frame.tb_frame.f_code.co_filename)
    return where.is_relative_to(root.resolve()) or where.is_relative_to(root)


def artune_decisions(root: Path, probes: list[Probe]) -> list[str]:
    """artune's answer per probe: the product's reader on the release (with the probe's variables set, as
    ``explain --env`` reads it, for the probe's dtype, as ``explain --dtype`` reads it), and ``decide``."""
    from artune.formats.vllm.read import read_vllm, rocm_tables

    out: dict[int, str] = {}
    for env, amd, dtype in dict.fromkeys((p.env, rocm.is_gfx(p.arch), p.dtype) for p in probes):
        mine = [i for i, p in enumerate(probes) if (p.env, rocm.is_gfx(p.arch), p.dtype) == (env, amd, dtype)]
        # the ROCm tables alone, as explain --arch gfx942 --env reads them; each read for the probes' dtype
        found = rocm_tables(str(root), dict(env), dtype) if amd else read_vllm(str(root), dict(env), dtype)
        answers = decide_all(found.tables, [probes[i] for i in mine], found.findings)
        out.update(zip(mine, answers, strict=True))
    return [out[i] for i in range(len(probes))]


def evaluated(root: Path) -> list[Evaluated]:
    """The dispatch functions artune's reading of the source at ``root`` evaluated, fingerprinted: what
    ``verify-engine --record`` keeps (``artune.formats.fingerprints.record``) once every probe agreed."""
    from artune.formats.vllm.read import evaluated as read_evaluated

    return read_evaluated(str(root))


ORACLE = Oracle(
    runs="vLLM's own dispatch code (its communicators' Python, run on stand-ins for GPUs, torch and FlashInfer)",
    releases=RELEASES,
    probes=probes,
    engine_decisions=engine_decisions,
    artune_decisions=artune_decisions,
    extra_probes=extra_probes,
    unprobed=unprobed,
    topology=topology,
    evaluated=evaluated,
)
