"""The machine a vLLM release is read on: what its communicators ask outside their own files, answered.

``artune.formats.vllm.code`` evaluates the release's own files with
``artune.formats.pyeval`` (never importing or running them). Whatever they
ask of the rest of vLLM, of torch, of FlashInfer or of the hardware is
answered here, for one ``GpuGroup`` at a time (``Stage`` holds the one being
read), with the facts a probe has: the platform (CUDA, or ROCm for AMD), the
compute capability, the world size, how many hosts the ranks span and
whether those share one NVLink domain, NVLink multicast, every GPU of a host
NVLink-connected to every other (NVSwitch), peer access working, and every
``VLLM_*`` variable unset unless ``settings`` sets it. What answers a call
is the smallest honest stand-in:

- ``torch.distributed``: a group of the probe's world size, this process rank
  0; ``all_gather`` reports physical device ``i`` for rank ``i``; a CPU
  ``all_reduce`` is an agreement among ranks that all say the same;
- torch symmetric memory: its rendezvous maps peer memory only within one
  NVLink domain (across a network it raises ``RuntimeError``) and reports a
  multicast address where the machine has multicast;
- FlashInfer (installed, as vLLM's CUDA wheels require): its workspaces are
  created where they map (``mnnvl`` needs multicast; neither maps across a
  network) and take every problem that fits the token count they were made
  for. That is FlashInfer's own ``is_buffer_size_sufficient`` for the TRT-LLM
  workspace, and for MNNVL's three Lamport slots, each sized for the whole
  token count (flashinfer-python 0.7.2.post1, the release vLLM 0.33 pins; the
  oracle runs that code itself);
- vLLM's C++ ops and allocations: pointers that do nothing.

The kernels record what ran (``Stage.ran``): ``custom_ar``, ``symm_mem_*``,
``flashinfer_ar``, ``nccl``, ``nccl_symmetric``, ``quick_ar_<level>`` and
``aiter_ar``. On ROCm (``GpuGroup.platform``, a gfx arch) the machine also
answers torch's ``gcnArchName``, ``vllm.platforms.rocm``'s arch tests and CDNA
version, ``use_custom_allreduce()`` (the MI300 series only), vLLM's
``rocm_aiter_ops`` (its switches as the release's ``envs.py`` computes them)
and AITER's own ``CustomAllreduce`` (``AITER_WORLD_SIZES``, ``AITER_MAX_SIZE``). The input is a
bf16 tensor of the probe's size, 2-D as vLLM's hidden states are,
of 16-byte rows (``ROW``), whose sizes are ``Linear`` in the bytes: every comparison the code makes with
them records where its answer flips (``Stage.flips``). Anything else the
files call outside themselves is opaque (``pyeval.Opaque``): it may be
passed around, and a decision on it is where the reading says it cannot
vouch (a caveat).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from artune import rocm
from artune.errors import Raised
from artune.formats.pyeval import Namespace, Native
from artune.formats.pyeval.values import Linear, Opaque

#: torch dtypes the files name: (bytes per element, floating point)
DTYPES = {
    "bfloat16": (2, True),
    "float16": (2, True),
    "half": (2, True),
    "float32": (4, True),
    "float": (4, True),
    "float64": (8, True),
    "int": (4, False),
    "int32": (4, False),
    "int64": (8, False),
    "long": (8, False),
    "uint8": (1, False),
    "int8": (1, False),
    "float8_e4m3fn": (1, True),
}
#: the bytes of one row of a hidden state: a message is ``(n / ROW, ROW / element size)``, whole rows of 16 bytes
#: (every model's hidden size is a multiple of 8 bf16 elements; vLLM 0.34's FlashInfer path refuses other rows)
ROW = 16
#: QuickReduce's levels in ``QuickReduceRegime``'s order (the value ``qr_all_reduce`` is given), as the catalog
#: names them
QUICK_LEVELS = ("quick_ar_fp", "quick_ar_int8", "quick_ar_int6", "quick_ar_int4", "quick_ar_int3")
#: ``ops.qr_max_size()``: vLLM's QuickReduce buffer, ``DeviceComms::kMaxProblemSize`` (2 GiB; vllm-project/vllm
#: csrc/quickreduce/quick_reduce.h)
QR_MAX_SIZE = 1 << 31
#: AITER's ``CustomAllreduce`` (ROCm/aiter aiter/dist/device_communicators/custom_all_reduce.py, commit
#: 03644e50): the world sizes it starts at, and the largest message its decode path takes
#: (``_fits_custom_ar_size``: 16-byte multiples, two ranks or fully connected, ``<= 8192 * 8192``)
AITER_WORLD_SIZES = (2, 4, 6, 8)
AITER_MAX_SIZE = 8192 * 8192
#: what each recorded kernel is called in artune's catalog
KERNELS = {
    "torch.ops.symm_mem.multimem_all_reduce_": "symm_mem_multimem",
    "torch.ops.symm_mem.two_shot_all_reduce_": "symm_mem_two_shot",
    "torch.ops.symm_mem.one_shot_all_reduce": "symm_mem_one_shot",
    "torch.ops.vllm.all_reduce_symmetric_with_copy": "nccl_symmetric",  # NCCL on symmetric (window) memory
    "vllm._custom_ops.all_reduce": "custom_ar",
    "vllm._custom_ops.qr_all_reduce": "quick_ar",  # at the level its fourth argument names (``QUICK_LEVELS``)
    "aiter.custom_all_reduce": "aiter_ar",
    "flashinfer.comm.allreduce_fusion": "flashinfer_ar",
}


@dataclass(frozen=True)
class GpuGroup:
    """The facts of one group of ranks: what a probe describes."""

    arch: str  # "9.0" or "gfx942"; "0.0" stands for an arch the release names nowhere (below every capability gate)
    world_size: int
    multicast: bool = True
    hosts: int = 1
    rack: bool = False  # across hosts: every host in one NVLink domain (else joined over a network)
    platform: str = "cuda"

    @property
    def capability(self) -> tuple[int, int]:
        """What torch reports: on ROCm HIP's major and minor for the gfx arch (9.4 on gfx942)."""
        arch = self.arch
        if rocm.is_gfx(arch):
            facts = rocm.arch_facts(arch)
            arch = facts.capability if facts is not None else "0.0"
        major, _, minor = arch.partition(".")
        return int(major), int(minor or 0)

    @property
    def one_domain(self) -> bool:
        """Whether peer memory maps between every pair of ranks (one host, or one NVLink domain)."""
        return self.hosts == 1 or self.rack

    def node(self, rank: int) -> int:
        return rank // (self.world_size // self.hosts)

    @property
    def gfx(self) -> str:
        """torch's ``gcnArchName`` on ROCm (``gfx942:sramecc+:xnack-``); empty on CUDA, which has none."""
        return f"{self.arch}:sramecc+:xnack-" if self.platform == rocm.KIND else ""

    @property
    def cdna(self) -> int | None:
        """vLLM's ``get_cdna_version()``: the arch's CDNA generation (``None`` off ROCm or for an unknown arch)."""
        facts = rocm.arch_facts(self.arch) if self.platform == rocm.KIND else None
        return facts.cdna if facts is not None else None


#: what each fact a stand-in may read of a machine depends on (a property answers from its fields)
_FIELDS = {
    "capability": ("arch",),
    "gfx": ("arch", "platform"),
    "cdna": ("arch", "platform"),
    "one_domain": ("hosts", "rack"),
    "node": ("world_size", "hosts"),
}


class _Watched:
    """A machine whose every fact read is noted (``Stage.read``): two machines that agree on every fact one
    reading asked get the same answers (the reading is deterministic), so the second need not be read."""

    def __init__(self, machine: GpuGroup, read: set[str]) -> None:
        self._machine = machine
        self._read = read

    def __getattr__(self, name: str) -> Any:
        self._read.update(_FIELDS.get(name, (name,)))
        return getattr(self._machine, name)


class Stage:
    """The machine being read and what the current call did: the kernels it ran, the sizes where its answer
    can flip, whether a CUDA graph is being captured, and which facts of the machine the reading asked."""

    def __init__(self, settings: Mapping[str, str] | None = None) -> None:
        self.settings: Mapping[str, str] = dict(settings or {})  # VLLM_* variables set (none: every default)
        self.current = GpuGroup("9.0", 2)
        self.read: set[str] = set()  # the facts (GpuGroup fields, "mode") read since ``look_at``
        self._capturing = False
        self.ran: list[str] = []
        #: where each kernel of ``ran`` was launched from (``site()`` at the launch: the branches being run)
        self.sites: list[Any] = []
        self.site: Callable[[], Any] = lambda: ()
        self.flips: set[float] = set()
        #: while the dispatch runs (``watching``): each variable it read, with the platform it was read on
        self.watching = False
        self.variables: set[tuple[str, str]] = set()

    def asked(self, name: str) -> None:
        """Note that the dispatch read environment variable ``name`` (through ``envs.py`` or ``os``)."""
        if self.watching:
            self.variables.add((name, self.current.platform))

    @property
    def machine(self) -> GpuGroup:
        return _Watched(self.current, self.read)  # type: ignore[return-value]

    def look_at(self, machine: GpuGroup) -> None:
        """Read ``machine`` from now on, no fact of it asked yet."""
        self.current = machine
        self.read.clear()

    @property
    def capturing(self) -> bool:
        """Whether the stream is capturing a CUDA graph (graph mode): reading it makes the mode a fact read."""
        self.read.add("mode")
        return self._capturing

    @capturing.setter
    def capturing(self, value: bool) -> None:
        self._capturing = value


def _native(name: str, func: Callable[..., Any]) -> Native:
    return Native(func, name)


def _namespace(name: str, values: dict[str, Any], rest: Callable[[str], Any] | None = None) -> Namespace:
    """A stand-in object: ``values``, and for any other attribute ``rest(name)`` (default: opaque)."""
    other = rest or (lambda attr: Opaque(f"{name}.{attr}"))
    return Namespace(name, {**values, "__getattr__": _native(f"{name}.__getattr__", other)})


def dtype(name: str) -> Namespace:
    size, floating = DTYPES[name]
    return Namespace("torch.dtype", {"itemsize": size, "is_floating_point": floating, "name": name})


class StandIns:
    """The fakes (``pyeval`` names -> values) of one reading: they answer for ``stage.machine``."""

    def __init__(self, stage: Stage) -> None:
        self.stage = stage
        self.dtypes = {name: dtype(name) for name in DTYPES}
        self.fakes: dict[str, Any] = {}
        self.envs: Callable[[str], Any] | None = None  # ``envs.NAME`` evaluated by the release's envs.py
        self._torch()
        self._distributed()
        self._vllm()
        self._flashinfer()

    # ---------------------------------------------------------------- tensors

    def tensor(self, nbytes: int, dtype_: Namespace, cuda: bool = True, values: list[Any] | None = None) -> Namespace:
        """A tensor of ``nbytes`` bytes; the probe's input (``cuda``, no ``values``: rows of ``ROW`` bytes) has
        ``Linear`` sizes, each a whole number of rows to a ``%``."""
        size = dtype_.values["itemsize"]
        flips = self.stage.flips
        data = list(values or [])
        if values is None and cuda:
            # whole rows of ROW bytes, whatever ``nbytes`` is: a cut point stands for the messages around it
            numel: int = Linear(nbytes // size, Fraction(1, size), 0, flips, ROW // size)
            total: int = Linear(nbytes, 1, 0, flips, ROW)
            shape: tuple[int, ...] = (Linear(nbytes // ROW, Fraction(1, ROW), 0, flips, 1), ROW // size)
        else:
            numel, total = nbytes // size, nbytes
            shape = (numel,)
        device = Namespace("torch.device", {"type": "cuda" if cuda else "cpu", "index": 0 if cuda else None})
        me = _namespace("torch.Tensor", {})

        def same(*args: Any, **kwargs: Any) -> Namespace:
            return me

        def fill(value: Any) -> Namespace:
            data[:] = [value]
            return me

        me.values.update(
            {
                "dtype": dtype_,
                "shape": shape,
                "nbytes": total,
                "is_cuda": cuda,
                "device": device,
                "ndim": len(shape),
                "numel": _native("Tensor.numel", lambda: numel),
                "element_size": _native("Tensor.element_size", lambda: size),
                "dim": _native("Tensor.dim", lambda: len(shape)),
                "size": _native("Tensor.size", lambda dim=None: shape if dim is None else shape[dim]),
                "is_contiguous": _native("Tensor.is_contiguous", lambda *a, **k: True),
                "is_floating_point": _native("Tensor.is_floating_point", lambda: dtype_.values["is_floating_point"]),
                "item": _native("Tensor.item", lambda: data[0] if data else 0),
                "tolist": _native("Tensor.tolist", lambda: list(data)),
                "fill_": _native("Tensor.fill_", fill),
                "__getitem__": _native("Tensor.__getitem__", same),
                "data_ptr": _native("Tensor.data_ptr", lambda: 0),
                "storage_offset": _native("Tensor.storage_offset", lambda: 0),
            }
        )
        for name in ("view", "reshape", "contiguous", "flatten", "as_strided", "clone", "copy_", "to", "cuda", "t"):
            me.values[name] = _native(f"Tensor.{name}", same)
        return me

    def _dtype_of(self, kwargs: dict[str, Any]) -> Namespace:
        found = kwargs.get("dtype")
        return found if isinstance(found, Namespace) else self.dtypes["float32"]

    def _empty(self, *size: Any, **kwargs: Any) -> Namespace:
        if len(size) == 1 and isinstance(size[0], (tuple, list)):
            size = tuple(size[0])
        count = 1
        for n in size:
            count *= int(n) if isinstance(n, int) else 1
        dtype_ = self._dtype_of(kwargs)
        # a buffer holds no values here (vLLM allocates megabytes); a one-element tensor is a value exchanged
        return self.tensor(count * dtype_.values["itemsize"], dtype_, cuda=False, values=[0] if count == 1 else [])

    def _like(self, other: Any, *args: Any, **kwargs: Any) -> Any:
        return other

    def _from_data(self, data: Any, *args: Any, **kwargs: Any) -> Namespace:
        items = list(data) if isinstance(data, (list, tuple)) else [data]
        dtype_ = self._dtype_of(kwargs)
        cuda = str(kwargs.get("device", "cpu")).startswith("cuda")
        return self.tensor(len(items) * dtype_.values["itemsize"], dtype_, cuda=cuda, values=items)

    # ---------------------------------------------------------------- torch

    def _record(self, path: str) -> Native:
        """A kernel launch: it notes what ran, and returns its input."""
        name = KERNELS.get(path, path)

        def run(*args: Any, **kwargs: Any) -> Any:
            self.stage.ran.append(name)
            self.stage.sites.append(self.stage.site())
            inputs = [*args, *kwargs.values()]
            return next((a for a in inputs if isinstance(a, Namespace) and a.name == "torch.Tensor"), None)

        return _native(path, run)

    def _torch(self) -> None:
        stage, fakes = self.stage, self.fakes
        for name, value in self.dtypes.items():
            fakes[f"torch.{name}"] = value
        fakes.update(
            {
                "torch.empty": _native("torch.empty", self._empty),
                "torch.zeros": _native("torch.zeros", self._empty),
                "torch.ones": _native("torch.ones", self._empty),
                "torch.empty_like": _native("torch.empty_like", self._like),
                "torch.zeros_like": _native("torch.zeros_like", self._like),
                "torch.tensor": _native("torch.tensor", self._from_data),
                "torch.cuda.is_available": _native("torch.cuda.is_available", lambda: stage.machine.platform != "cpu"),
                "torch.cuda.device_count": _native("torch.cuda.device_count", self._local_ranks),
                "torch.cuda.current_device": _native("torch.cuda.current_device", lambda: 0),
                "torch.cuda.get_device_capability": _native(
                    "torch.cuda.get_device_capability", lambda *a: stage.machine.capability
                ),
                "torch.cuda.get_device_properties": _native("torch.cuda.get_device_properties", self._properties),
                "torch.cuda.is_current_stream_capturing": _native(
                    "torch.cuda.is_current_stream_capturing", lambda: stage.capturing
                ),
                "torch.cuda.can_device_access_peer": _native("torch.cuda.can_device_access_peer", lambda a, b: True),
                # torch's _SymmetricMemory.has_multicast_support(CUDA, device): what the machine's GPU says
                "torch._C._distributed_c10d._SymmetricMemory.has_multicast_support": _native(
                    "has_multicast_support", lambda *a: stage.machine.multicast
                ),
                "torch.distributed._symmetric_memory.empty": _native(
                    "torch_symm_mem.empty", lambda *size, **kw: self._empty(*size, **kw)
                ),
                "torch.distributed._symmetric_memory.rendezvous": _native(
                    "torch_symm_mem.rendezvous", self._rendezvous
                ),
            }
        )
        for path in KERNELS:
            if path.startswith("torch."):
                fakes[path] = self._record(path)

    def _properties(self, *args: Any) -> Namespace:
        machine = self.stage.machine
        major, minor = machine.capability
        return Namespace("DeviceProperties", {"gcnArchName": machine.gfx, "major": major, "minor": minor})

    def _rendezvous(self, buffer: Any, group_name: Any = None) -> Namespace:
        machine = self.stage.machine
        if not machine.one_domain:  # torch exchanges handles it cannot import from another NVLink domain
            raise Raised("RuntimeError", "symmetric memory rendezvous: peer memory of another NVLink domain")
        return _namespace(
            "torch_symm_mem.handle",
            {
                "multicast_ptr": 1 if machine.multicast else 0,
                "buffer_ptrs": [0] * machine.world_size,
                "get_buffer": _native("handle.get_buffer", lambda *a, **k: buffer),
            },
        )

    def _local_ranks(self) -> int:
        machine = self.stage.machine
        return machine.world_size // machine.hosts

    # ---------------------------------------------------------------- torch.distributed

    def _distributed(self) -> None:
        stage, fakes = self.stage, self.fakes
        self.group = _namespace(
            "ProcessGroup",
            {
                "group_name": "tp:0",
                "rank": _native("ProcessGroup.rank", lambda: 0),
                "size": _native("ProcessGroup.size", lambda: stage.machine.world_size),
            },
        )

        def all_gather(out: list[Any], tensor: Any, group: Any = None, **kwargs: Any) -> None:
            for rank, item in enumerate(out):  # rank i reports physical device i of its host
                if isinstance(item, Namespace) and "fill_" in item.values:
                    item.values["fill_"].func(rank % self._local_ranks())

        def all_reduce(tensor: Any, *args: Any, **kwargs: Any) -> Any:
            if isinstance(tensor, Namespace) and tensor.values.get("is_cuda"):
                stage.ran.append("nccl")
            return None  # a CPU all-reduce: an agreement of ranks that all say the same

        def gather_object(out: list[Any], obj: Any, group: Any = None) -> None:
            out[:] = [obj] * len(out)

        d = "torch.distributed."
        fakes.update(
            {
                d + "is_initialized": _native("dist.is_initialized", lambda: True),
                d + "get_rank": _native("dist.get_rank", lambda group=None: 0),
                d + "get_world_size": _native("dist.get_world_size", lambda group=None: stage.machine.world_size),
                d + "get_backend": _native("dist.get_backend", lambda group=None: "gloo"),
                d + "Backend.NCCL": "nccl",
                d + "get_process_group_ranks": _native(
                    "dist.get_process_group_ranks", lambda group: list(range(stage.machine.world_size))
                ),
                d + "get_group_rank": _native("dist.get_group_rank", lambda group, rank: rank),
                d + "all_gather": _native("dist.all_gather", all_gather),
                d + "all_gather_object": _native("dist.all_gather_object", gather_object),
                d + "broadcast_object_list": _native("dist.broadcast_object_list", lambda *a, **k: None),
                d + "barrier": _native("dist.barrier", lambda *a, **k: None),
                d + "all_reduce": _native("dist.all_reduce", all_reduce),
                d + "group.WORLD": self.group,
                d + "distributed_c10d._world": Namespace("_world", {"pg_map": {self.group: ("gloo", None)}}),
            }
        )

    # ---------------------------------------------------------------- vLLM's modules that ask the machine

    def _vllm(self) -> None:
        stage, fakes = self.stage, self.fakes

        def capability(*args: Any) -> Namespace:
            major, minor = stage.machine.capability
            return Namespace(
                "DeviceCapability",
                {
                    "major": major,
                    "minor": minor,
                    "as_version_str": _native("as_version_str", lambda: f"{major}.{minor}"),
                    "to_int": _native("to_int", lambda: major * 10 + minor),
                    "__getitem__": _native("DeviceCapability[]", lambda i: (major, minor)[i]),
                },
            )

        def at_least(want: Any, *args: Any) -> bool:
            major, minor = stage.machine.capability
            need = want if isinstance(want, int) else want[0] * 10 + want[1]
            return major * 10 + minor >= need

        def equal(want: Any, *args: Any) -> bool:
            major, minor = stage.machine.capability
            need = want if isinstance(want, int) else want[0] * 10 + want[1]
            return major * 10 + minor == need

        def family(want: int, *args: Any) -> bool:
            major, _minor = stage.machine.capability
            return major == want // 10

        def platform(kind: str) -> Native:
            return _native(f"current_platform.is_{kind}", lambda: stage.machine.platform == kind)

        current = _namespace(
            "current_platform",
            {
                "device_type": "cuda",
                "device_name": "cuda",
                "is_cuda": platform("cuda"),
                "is_rocm": platform("rocm"),
                "is_xpu": platform("xpu"),
                "is_cpu": platform("cpu"),
                "is_tpu": platform("tpu"),
                "is_cuda_alike": _native("is_cuda_alike", lambda: stage.machine.platform in ("cuda", "rocm")),
                "get_device_capability": _native("get_device_capability", capability),
                "has_device_capability": _native("has_device_capability", at_least),
                "is_device_capability": _native("is_device_capability", equal),
                "is_device_capability_family": _native("is_device_capability_family", family),
                "is_fully_connected": _native("is_fully_connected", lambda ids: True),  # NVSwitch, or XGMI
                "use_custom_allreduce": _native("use_custom_allreduce", self.use_custom_allreduce),
                "device_count": _native("device_count", self._local_ranks),
                "visible_device_id_to_physical_device_id": _native("visible_to_physical", lambda i: i),
                "logical_device_id_to_visible_device_id": _native("logical_to_visible", lambda i: i),
                "get_device_name": _native("get_device_name", lambda *a: f"sm_{stage.machine.arch}"),
            },
        )

        def same_node(group: Any = None, source_rank: int = 0) -> list[bool]:
            machine = stage.machine
            return [machine.node(rank) == machine.node(source_rank) for rank in range(machine.world_size)]

        def quiet(name: str) -> Native:
            return _native(name, lambda *args, **kwargs: None)

        logger = _namespace("logger", {}, lambda attr: quiet(f"logger.{attr}"))
        ops = _namespace("vllm._custom_ops", {}, lambda attr: _native(f"ops.{attr}", lambda *a, **k: 0))
        ops.values.update(
            {
                "allocate_shared_buffer_and_handle": _native("ops.allocate", lambda *a: (0, b"")),
                "get_graph_buffer_ipc_meta": _native("ops.get_graph_buffer_ipc_meta", lambda *a: ([], [])),
                "all_reduce": self._record("vllm._custom_ops.all_reduce"),
                "qr_all_reduce": _native("ops.qr_all_reduce", self._quick_reduce),
                "qr_max_size": _native("ops.qr_max_size", lambda: QR_MAX_SIZE),
            }
        )

        def pynccl(group: Any = None, device: Any = None, **kwargs: Any) -> Namespace:
            return _namespace(
                "PyNcclCommunicator",
                {
                    "world_size": stage.machine.world_size,
                    "rank": 0,
                    "disabled": False,
                    "available": True,
                    "all_reduce": self._record("nccl"),
                },
            )

        v = "vllm."
        fakes.update(
            {
                v + "platforms.current_platform": current,
                v + "logger.init_logger": _native("init_logger", lambda *a, **k: logger),
                v + "logger.logger": logger,
                v + "_custom_ops": ops,
                v + "config.get_current_vllm_config_or_none": _native("get_current_vllm_config_or_none", lambda: None),
                v + "config.get_current_vllm_config": _native("get_current_vllm_config", lambda: None),
                v + "distributed.parallel_state.in_the_same_node_as": _native("in_the_same_node_as", same_node),
                v + "distributed.parallel_state._node_count": _native("_node_count", lambda *a: stage.machine.hosts),
                v + "distributed.parallel_state.get_node_count": _native("get_node_count", lambda: stage.machine.hosts),
                v + "distributed.utils.is_weak_contiguous": _native("is_weak_contiguous", lambda t: True),
                v + "distributed.device_communicators.pynccl.PyNcclCommunicator": _native("PyNcclCommunicator", pynccl),
                v + "distributed.device_communicators.pynccl.register_nccl_symmetric_ops": quiet("register_ops"),
                # the probe's GPUs pass vLLM's peer-to-peer test (it runs CUDA in a subprocess)
                v + "distributed.device_communicators.all_reduce_utils.gpu_p2p_access_check": _native(
                    "gpu_p2p_access_check", lambda *a: True
                ),
                v + "distributed.device_communicators.custom_all_reduce_utils.gpu_p2p_access_check": _native(
                    "gpu_p2p_access_check", lambda *a: True
                ),
                v + "utils.cuda_device_count_stateless": _native("cuda_device_count_stateless", self._local_ranks),
                v + "utils.torch_utils.cuda_device_count_stateless": _native(
                    "cuda_device_count_stateless", self._local_ranks
                ),
                v + "utils.gpu_sync_debug.gpu_sync_allowed": _native("gpu_sync_allowed", lambda *a, **k: None),
                v + "model_executor.layers.batch_invariant.vllm_is_batch_invariant": _native(
                    "vllm_is_batch_invariant", lambda: self.setting("VLLM_BATCH_INVARIANT", "0") not in ("", "0")
                ),
                v + "_aiter_ops.rocm_aiter_ops": _namespace(
                    "rocm_aiter_ops",
                    {
                        "is_custom_all_reduce_enabled": _native("aiter enabled", self._aiter_enabled),
                        # AITER's FlyDSL kernels: not among what the reading assumes installed (HIP QuickReduce)
                        "is_flydsl_quick_reduce_available": _native("flydsl available", lambda: False),
                    },
                ),
                "aiter.dist.device_communicators.custom_all_reduce.CustomAllreduce": _native(
                    "aiter CustomAllreduce", self._aiter
                ),
                **{f"{v}platforms.rocm.{name}": _native(name, answer) for name, answer in self._rocm_facts().items()},
                "importlib.util.find_spec": _native("find_spec", lambda name, *a: Namespace("ModuleSpec", {})),
                # the torch vLLM's wheels pin registers custom ops (torch >= 2.4)
                v + "utils.supports_custom_op": _native("supports_custom_op", lambda: True),
                "json.loads": _native("json.loads", json.loads),  # pure: a setting's JSON text to its value
                "typing.TYPE_CHECKING": False,
            }
        )

    # ---------------------------------------------------------------- ROCm

    def _rocm_facts(self) -> dict[str, Callable[..., Any]]:
        """``vllm.platforms.rocm``'s arch tests, for the machine's gfx arch (all false off ROCm)."""

        def on(*prefixes: str) -> Callable[[], bool]:
            return lambda: any(self.stage.machine.gfx.startswith(p) for p in prefixes)

        return {
            "on_gfx9": on("gfx90a", "gfx942", "gfx950"),
            "on_mi3xx": on("gfx942", "gfx950"),
            "on_gfx942": on("gfx942"),
            "on_gfx950": on("gfx950"),
            "on_gfx1x": on("gfx11", "gfx12"),
            "on_gfx1250": on("gfx1250"),
            "get_cdna_version": lambda: self.stage.machine.cdna,
        }

    def use_custom_allreduce(self) -> bool:
        """vLLM's ``current_platform.use_custom_allreduce()``, which ``ParallelConfig`` turns into
        ``disable_custom_all_reduce`` (so ``parallel_state._ENABLE_CUSTOM_ALL_REDUCE``): always on CUDA; on ROCm
        the MI300 series only, gfx94* and gfx95* (``RocmPlatform.use_custom_allreduce``, vllm/platforms/rocm.py;
        it also gates QuickReduce and AITER's custom all-reduce)."""
        machine = self.stage.machine
        return machine.platform != rocm.KIND or machine.gfx.startswith(("gfx94", "gfx95"))

    def _aiter_enabled(self) -> bool:
        """vLLM's ``rocm_aiter_ops.is_custom_all_reduce_enabled()``: AITER is supported (ROCm on a gfx9 arch,
        AITER installed) and both switches, ``VLLM_ROCM_USE_AITER`` and ``VLLM_ROCM_USE_AITER_CUSTOM_AR``, are on
        as the release's own ``envs.py`` computes them."""
        machine = self.stage.machine
        if machine.platform != rocm.KIND or not self._rocm_facts()["on_gfx9"]():
            return False
        return bool(self.env("VLLM_ROCM_USE_AITER")) and bool(self.env("VLLM_ROCM_USE_AITER_CUSTOM_AR"))

    def _aiter(self, group: Any = None, device: Any = None, max_size: int = 0, **kwargs: Any) -> Namespace:
        """AITER's ``CustomAllreduce`` (``AITER_WORLD_SIZES``, ``AITER_MAX_SIZE``): it starts at its world sizes
        on one host of fully connected GPUs, and takes 16-byte multiples up to its decode bound."""
        machine = self.stage.machine
        disabled = machine.world_size not in AITER_WORLD_SIZES or machine.hosts > 1

        def should(inp: Any, *args: Any, **kw: Any) -> bool:
            size = inp.values["nbytes"]
            return not disabled and size % ROW == 0 and size <= AITER_MAX_SIZE

        return _namespace(
            "aiter CustomAllreduce",
            {
                "disabled": disabled,
                "fully_connected": True,
                "max_size": max_size,
                "should_custom_ar": _native("aiter.should_custom_ar", should),
                "custom_all_reduce": self._record("aiter.custom_all_reduce"),
                "capture": _native("aiter.capture", lambda: Opaque("aiter capture")),
            },
        )

    def _quick_reduce(self, ptr: Any, inp: Any, out: Any = None, level: Any = 0, *args: Any, **kwargs: Any) -> Any:
        """``ops.qr_all_reduce(ptr, inp, out, level, cast_bf16_to_fp16)``: QuickReduce ran at ``level``."""
        name = QUICK_LEVELS[level] if isinstance(level, int) and 0 <= level < len(QUICK_LEVELS) else "quick_ar"
        return self._record(name).func(inp, out)

    def env(self, name: str) -> Any:
        """``envs.NAME`` as the release computes it (``ReleaseCode`` sets where it is read); ``None`` until then."""
        return self.envs(name) if self.envs is not None else None

    def setting(self, name: str, default: str | None = None) -> str | None:
        """The value of environment variable ``name`` on this machine (``settings``; unset: ``default``)."""
        self.stage.asked(name)
        return self.stage.settings.get(name, default)

    # ---------------------------------------------------------------- FlashInfer

    def _flashinfer(self) -> None:
        stage = self.stage

        def workspace(backend: str = "auto", **kwargs: Any) -> Namespace:
            """``create_allreduce_fusion_workspace(backend, world_size, rank, max_token_num, hidden_dim, ...)``."""
            machine = stage.machine
            if backend == "mnnvl" and not machine.multicast:
                raise Raised("RuntimeError", "Multicast pointer is null after rendezvous (no NVLink multicast)")
            if not machine.one_domain:  # mnnvl's fabric handles, trtllm's IPC: neither maps across a network
                raise Raised("RuntimeError", f"{backend} workspace: peer memory of another NVLink domain")
            capacity = int(kwargs.get("max_token_num", 0)) * int(kwargs.get("hidden_dim", 0))

            def fits(*args: Any, **kw: Any) -> bool:
                tokens = kw.get("num_tokens", args[1] if len(args) > 1 else 0)
                hidden = kw.get("hidden_dim", args[2] if len(args) > 2 else 1)
                return tokens * hidden <= capacity

            return _namespace(
                "flashinfer workspace",
                {
                    "backend": backend,
                    "mc_ptr": 1,
                    "is_buffer_size_sufficient": _native("is_buffer_size_sufficient", fits),
                    "destroy": _native("workspace.destroy", lambda: None),
                },
            )

        comm = _namespace(
            "flashinfer.comm",
            {
                "allreduce_fusion": self._record("flashinfer.comm.allreduce_fusion"),
                "create_allreduce_fusion_workspace": _native("create_allreduce_fusion_workspace", workspace),
                "AllReduceFusionPattern": Namespace("AllReduceFusionPattern", {"kAllReduce": 0}),
            },
        )
        self.fakes.update(
            {
                "flashinfer.comm": comm,
                "flashinfer.comm.allreduce_fusion": comm.values["allreduce_fusion"],
                "flashinfer.comm.mnnvl.TorchDistBackend": _native(
                    "TorchDistBackend", lambda *a, **k: Opaque("backend")
                ),
            }
        )


def environ(stage: Stage) -> Namespace:
    """``os`` as ``envs.py`` reads it: ``getenv`` and ``environ`` hold ``settings`` only; each variable read
    while the dispatch runs is noted (``Stage.asked``)."""

    def getenv(name: str, default: Any = None) -> Any:
        stage.asked(name)
        return stage.settings.get(name, default)

    def contains(name: str) -> bool:
        stage.asked(name)
        return name in stage.settings

    def lookup(name: str) -> str:
        stage.asked(name)
        return _lookup(stage.settings, name)

    return _namespace(
        "os",
        {
            "getenv": _native("os.getenv", getenv),
            "environ": _namespace(
                "os.environ",
                {
                    "get": _native("os.environ.get", getenv),
                    "__contains__": _native("os.environ.__contains__", contains),
                    "__getitem__": _native("os.environ[]", lookup),
                },
            ),
            "path": _namespace("os.path", {}),
        },
    )


def _lookup(settings: Mapping[str, str], name: str) -> str:
    if name not in settings:
        raise Raised("KeyError", f"os.environ[{name!r}]: not set")
    return settings[name]


__all__ = ["DTYPES", "KERNELS", "GpuGroup", "Stage", "StandIns", "environ"]
