"""This host's GPUs as facts: what a CUDA measurement log's header and a CUDA table's provenance record.

``gpu_facts()`` reads them with ``torch.cuda`` (and NVML through the
optional ``nvidia-ml-py`` package for the NVLink topology). It is only
called when CUDA is used; everything else here is plain data, tested on
CPU (where this has run: docs/status.md).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

from artune import rocm
from artune.errors import ArtuneError
from artune.platforms import Platform


@dataclass(frozen=True)
class GpuFacts:
    """One host's GPUs (the current device's properties, the peer matrix of all local ones)."""

    name: str
    capability: str  # "9.0", "10.7": the table's arch
    sm_count: int
    memory_gib: float
    count: int  # local GPUs
    driver: str = ""
    cuda: str = ""
    nccl: str = ""
    torch: str = ""
    peer_access: str = ""  # "all", "none", or the pairs without access
    multicast: str = ""  # "yes", "no", or why unknown
    nvlink: str = ""  # NVML's view of the NVLink links, or why it is unknown
    gcn_arch: str = ""  # on a ROCm build of torch, the device's gcnArchName ("gfx942:sramecc+:xnack-"); "" on CUDA

    def platform(self) -> Platform:
        """The table's platform: kind ``cuda``, arch = the compute capability, device = name and SMs; on an AMD
        GPU kind ``rocm``, arch = the gfx arch (``artune.rocm``: the capability torch reports collides with
        NVIDIA's numbers), device = name and compute units."""
        gfx = rocm.gfx_arch(self.gcn_arch) if self.gcn_arch else None
        if gfx is not None:
            return Platform(kind=rocm.KIND, arch=gfx, device=f"{self.name}, {self.sm_count} CUs")
        return Platform(kind="cuda", arch=self.capability, device=f"{self.name}, {self.sm_count} SMs")

    def fingerprint(self) -> str:
        """Keys this host's measured GPU table: same GPU model, count, SMs and memory measure alike."""
        plat = self.platform()
        text = f"{plat.kind}|{plat.arch}|{self.name}|{self.count}|{self.sm_count}|{round(self.memory_gib)}GiB"
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    @classmethod
    def from_dict(cls, data: Mapping[str, str]) -> GpuFacts:
        """The facts ``as_dict`` wrote (unknown keys are ignored); ``ArtuneError`` when one is missing."""
        try:
            return cls(
                name=str(data["name"]),
                capability=str(data["capability"]),
                sm_count=int(data["sm_count"]),
                memory_gib=float(data["memory_gib"]),
                count=int(data["count"]),
                **{k: str(data.get(k, "")) for k in _TEXT_FIELDS},
            )
        except (KeyError, ValueError) as err:
            raise ArtuneError(f"GPU facts are incomplete or malformed ({err!r}): {dict(data)!r}") from None

    def as_dict(self) -> dict[str, str]:
        """Every fact as text (the measurement log header's ``gpu``)."""
        return {k: str(v) for k, v in asdict(self).items()}

    def describe(self) -> str:
        """One line for reports."""
        plat = self.platform()
        units = "CUs" if plat.kind == rocm.KIND else "SMs"
        arch = plat.arch if plat.kind == rocm.KIND else f"sm_{plat.arch.replace('.', '')}"
        arch += f", {self.sm_count} {units}"
        return (
            f"{self.count}x {self.name} ({arch}, "
            f"{self.memory_gib:.0f} GiB); driver {self.driver or '?'}, CUDA {self.cuda or '?'}, "
            f"NCCL {self.nccl or '?'}, torch {self.torch or '?'}; peer access {self.peer_access or '?'}; "
            f"multicast {self.multicast or '?'}; NVLink {self.nvlink or '?'}"
        )


_TEXT_FIELDS = ("driver", "cuda", "nccl", "torch", "peer_access", "multicast", "nvlink", "gcn_arch")


def peer_summary(access: Sequence[Sequence[bool]]) -> str:
    """``"all"``, ``"none"``, ``"single GPU"`` or the pairs lacking access, from ``access[i][j]`` (i != j)."""
    n = len(access)
    if n < 2:
        return "single GPU"
    missing = [f"{i}->{j}" for i in range(n) for j in range(n) if i != j and not access[i][j]]
    if not missing:
        return "all"
    if len(missing) == n * (n - 1):
        return "none"
    return "missing " + ", ".join(missing)


def _multicast(index: int) -> str:
    try:
        import torch
        from torch._C._distributed_c10d import _SymmetricMemory

        return "yes" if _SymmetricMemory.has_multicast_support(torch._C._autograd.DeviceType.CUDA, index) else "no"
    except Exception as err:  # an older torch, or symmetric memory not built in
        return f"unknown ({type(err).__name__}: {err})"[:120]


def nvlink_summary(count: int) -> str:
    """Active NVLink links per GPU via NVML (``nvidia-ml-py``), or why it cannot be read."""
    try:
        import pynvml  # type: ignore[import-not-found]
    except ImportError:
        return "unknown (nvidia-ml-py not installed)"
    try:
        pynvml.nvmlInit()
        try:
            parts = []
            for i in range(count):
                handle = pynvml.nvmlDeviceGetHandleByIndex(i)
                active = 0
                for link in range(getattr(pynvml, "NVML_NVLINK_MAX_LINKS", 18)):
                    try:
                        active += pynvml.nvmlDeviceGetNvLinkState(handle, link) == pynvml.NVML_FEATURE_ENABLED
                    except pynvml.NVMLError:
                        break
                parts.append(f"gpu{i}: {active} links")
            return "; ".join(parts)
        finally:
            pynvml.nvmlShutdown()
    except Exception as err:  # NVML present but unusable (container without the driver's library, ...)
        return f"unknown (NVML: {err})"[:120]


def _driver() -> str:
    try:
        import pynvml  # type: ignore[import-not-found]

        pynvml.nvmlInit()
        try:
            version = pynvml.nvmlSystemGetDriverVersion()
            return version.decode() if isinstance(version, bytes) else str(version)
        finally:
            pynvml.nvmlShutdown()
    except Exception:
        return ""


def gpu_facts(device: int | None = None) -> GpuFacts:
    """The facts of this host's GPUs, for ``device`` (default: the current one); ``ArtuneError`` without CUDA."""
    import torch

    if not torch.cuda.is_available():
        raise ArtuneError("no CUDA device here (torch.cuda.is_available() is False); use --device cpu")
    index = torch.cuda.current_device() if device is None else device
    props = torch.cuda.get_device_properties(index)
    count = torch.cuda.device_count()
    access = [[i == j or torch.cuda.can_device_access_peer(i, j) for j in range(count)] for i in range(count)]
    try:
        nccl = ".".join(str(p) for p in torch.cuda.nccl.version())
    except Exception:
        nccl = ""
    return GpuFacts(
        name=props.name,
        capability=f"{props.major}.{props.minor}",
        sm_count=int(props.multi_processor_count),
        memory_gib=props.total_memory / (1 << 30),
        count=count,
        driver=_driver(),
        cuda=str(torch.version.cuda or ""),
        nccl=nccl,
        torch=torch.__version__,
        peer_access=peer_summary(access),
        multicast=_multicast(index),
        nvlink=nvlink_summary(count),
        gcn_arch=str(getattr(props, "gcnArchName", "")) if getattr(torch.version, "hip", None) else "",
    )
