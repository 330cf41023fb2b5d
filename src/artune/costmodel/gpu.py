"""The GPU cost model: latency forms of the NVLink kernels, in physical parameters per arch family.

Every kernel is the minimum of one or more straight lines in the message
size ``n`` (bytes per rank): ``time = a + s n`` microseconds. With ``p``
ranks, ``R`` a synchronisation round (``round@F`` of the arch family ``F``,
times ``eager_round`` for a call timed on its own) and ``B`` the link
bandwidth a one-shot kernel reaches (``link@F`` times the GPU's NVLink
bandwidth per direction), the forms are:

- ``one_shot``: ``R + (p-1) n / B`` (every rank reads all peers' inputs);
- ``two_shot``: ``2 R + 2 (p-1)/p n / B`` (reduce-scatter, all-gather);
- ``multicast``: ``mc_rounds R + (1 + 1/p) n / B`` (NVLink SHARP, multimem: the switch reduces;
  each rank's link carries its share and, multicast, every other one: ``multicast_traffic``);
- ``library``: NCCL's own structure (its ``tuning.cc``): ring LL, LL128 and
  Simple, ``base + 2 (p-1) hop R + 2 (p-1)/p n / B``, and NVLS with few and
  with all channels, ``base + n / B``, each with its own efficiency (NCCL's
  bandwidth ramps up with the size); ``library/nccl`` is their minimum,
  ``library/nccl_ring`` and ``library/nccl_nvls`` forced; ``nccl:eager`` adds NCCL's own
  host cost to a call timed on its own. A ring step's latency ``hop`` is
  counted in rounds ``R`` of the family: a step is a flag exchange over the
  same NVLink a custom kernel's round is, so NCCL's step latency grows with
  the family's as the custom kernels' does (NCCL's own small-message
  latency is worse on Blackwell than on Hopper and grows faster with the
  world size: NVIDIA/nccl issue #1940, 8xB200 against 8xH200).

A kernel is ``SCHEME/IMPLEMENTATION`` in the catalog's words (``KERNELS``;
``model_kernel`` names an engine's kernel so). Each byte term has an
efficiency per kernel (``SCHEME/IMPL:bytes``, relative to the custom
one-shot's). The torch symmetric-memory kernels launch a fixed grid (24
blocks, 8 for multimem: PyTorch's
``torch/csrc/distributed/c10d/symm_mem/CUDASymmetricMemoryOps.cu``) whatever the GPU, so they have extra
rounds (``SCHEME/torch:rounds``) and a bandwidth cap (``SCHEME/torch:GBps``): the slower of the link and their blocks. A
multicast operation's latency is ``mc_rounds`` rounds of its family. A
per-call overhead common to every kernel (the launch) does not change which
is fastest; a sweep's own offset absorbs it in the fit
(``artune.costmodel.calibrate``), and the median offset per family and mode is
kept as the launch overhead (``GpuFit.overhead_us``).

Arch families: ``9`` (Hopper, 9.x) and ``10`` (Blackwell, 10.0-10.6, as
SGLang's SM100 rule). An arch of no fitted family (Rubin, 10.7) takes the
newest family's parameters with its own NVLink bandwidth; its round latency
follows ``UNSEEN_RULES`` (see ``round_for``). AMD archs (gfx names,
``artune.rocm``) are families by CDNA generation: ``cdna3`` (gfx942) and
``cdna4`` (gfx950); an AMD arch of neither takes the newest's parameters,
its round latency too.

An AMD node has no switch: each GPU has one Infinity Fabric link to each
peer (``Machine.links``), so at ``p`` ranks a GPU reaches its peers over
``p - 1`` links and ``B`` is ``link@F`` times ``(p - 1)`` links' bandwidth
(``Machine.bandwidth``): a one-shot moves ``n`` per link whatever ``p``, a
two-shot ``2 n / p``. There the library is RCCL (``library/rccl``): NCCL's
ring forms, its base latencies and per-byte costs each scaled by one factor
(``rccl:base``, ``rccl:bytes``: RCCL is NCCL's code, tuned for these GPUs),
no NVLS. QuickReduce (``two_shot/quickreduce_<level>``) is a two-shot whose
wire bytes are the level's codec's (``catalog.QUICK_REDUCE_LEVELS``: a
known fraction of fp16's), with its own per-byte efficiency and extra rounds
(``two_shot/quickreduce:*``); a quantized level adds the codec: more rounds
(``quickreduce:codec_rounds``) and a throughput on the input
(``quickreduce:codec_GBps``).

Per-world-size terms (``eager_round@ws3``, ``two_shot_bytes@ws3``, ...) are
factors the data chose (``calibrate.select_terms``); absent, they are 1.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import numpy as np

from artune import catalog, rocm
from artune.costmodel.cost import VERSION
from artune.errors import ArtuneError

Theta = Mapping[str, np.ndarray]  # parameter name -> values, one per replicate (shape (b,))

#: NCCL's own figures (NVIDIA/nccl ``src/graph/tuning.cc``: base and NVLink latencies) centre the NCCL
#: priors; the step latencies are in rounds, centred on its NVLink ones (0.6, 1.9, 3.4 us) over the round's
#: prior (2 us)
PARAMS: dict[str, tuple[float, float, str]] = {
    # name: (prior centre, prior sd of the log, meaning)
    "mc_rounds": (3.0, 0.7, "a multicast operation's latency, in rounds"),
    "eager_round": (1.0, 0.7, "a round's cost in a call timed on its own, relative to pipelined calls"),
    "two_shot/custom:bytes": (1.0, 0.5, "custom two-shot per-byte cost, relative to custom one-shot's"),
    "multicast/custom:bytes": (1.0, 0.7, "custom multicast per-byte cost, relative to custom one-shot's"),
    "one_shot/torch:bytes": (1.5, 0.7, "torch one-shot per-byte cost, relative to custom one-shot's"),
    "two_shot/torch:bytes": (1.5, 0.7, "torch two-shot per-byte cost, relative to custom one-shot's"),
    "multicast/torch:bytes": (1.5, 0.7, "torch multicast per-byte cost, relative to custom one-shot's"),
    "one_shot/torch:rounds": (1.0, 1.0, "torch one-shot extra rounds"),
    "two_shot/torch:rounds": (1.0, 1.0, "torch two-shot extra rounds"),
    "multicast/torch:rounds": (1.0, 1.0, "torch multicast extra rounds"),
    "one_shot/torch:GBps": (300.0, 1.0, "torch one-shot's bandwidth with its fixed blocks (24 x 512 threads), GB/s"),
    "two_shot/torch:GBps": (300.0, 1.0, "torch two-shot's bandwidth with its fixed blocks (24 x 1024), GB/s"),
    "multicast/torch:GBps": (300.0, 1.0, "torch multicast's bandwidth with its fixed blocks (8 x 1024), GB/s"),
    "nccl:ll": (6.6, 0.5, "NCCL ring LL base latency, us"),
    "nccl:ll_hop": (0.3, 0.7, "NCCL ring LL latency per step, rounds"),
    "nccl:ll_bytes": (2.0, 0.5, "NCCL ring LL per-byte cost, relative to custom one-shot's"),
    "nccl:ll128": (14.0, 0.5, "NCCL ring LL128 base latency, us"),
    "nccl:ll128_hop": (0.95, 0.7, "NCCL ring LL128 latency per step, rounds"),
    "nccl:ll128_bytes": (1.1, 0.5, "NCCL ring LL128 per-byte cost, relative to custom one-shot's"),
    "nccl:simple": (8.4, 0.5, "NCCL ring Simple base latency, us"),
    "nccl:simple_hop": (1.7, 0.7, "NCCL ring Simple latency per step, rounds"),
    "nccl:ring_bytes": (1.0, 0.5, "NCCL ring Simple per-byte cost, relative to custom one-shot's"),
    "nccl:nvls_small": (10.0, 0.7, "NCCL NVLS base latency with few channels, us"),
    "nccl:nvls_small_bytes": (2.0, 0.7, "NCCL NVLS per-byte cost with few channels, relative to custom one-shot's"),
    "nccl:nvls": (25.0, 0.7, "NCCL NVLS at all channels: its line's intercept, us (tuning.cc latency 25)"),
    "nccl:nvls_bytes": (1.0, 0.5, "NCCL NVLS per-byte cost, relative to custom one-shot's"),
    "nccl:eager": (3.0, 1.0, "NCCL's extra per-call cost in a call timed on its own, us"),
    "rccl:base": (1.0, 0.5, "RCCL's base latencies, relative to NCCL's"),
    "rccl:bytes": (1.0, 0.5, "RCCL's per-byte costs, relative to NCCL's ring"),
    "two_shot/quickreduce:bytes": (1.0, 0.5, "QuickReduce per-byte cost on the wire, relative to custom one-shot's"),
    "two_shot/quickreduce:rounds": (1.0, 1.0, "QuickReduce extra rounds"),
    "quickreduce:codec_rounds": (3.0, 1.0, "a quantized QuickReduce level's extra rounds (its codec's set-up)"),
    "quickreduce:codec_GBps": (1000.0, 1.0, "a quantized QuickReduce level's codec throughput on the input, GB/s"),
}
FAMILY_PARAMS: dict[str, tuple[float, float, str]] = {
    "round": (2.0, 1.0, "one synchronisation round, us (pipelined calls)"),
    "link": (0.7, 0.5, "share of the link bandwidth per direction (NVLink's, AMD's links') a custom one-shot reaches"),
}
#: per-world-size terms the data may choose (``calibrate.select_terms``): factor name -> meaning
TERMS: dict[str, str] = {
    "eager_round": "a round's cost in a call timed on its own at this world size, relative to eager_round",
    "graph_round": "a round's cost in pipelined calls at this world size",
    "two_shot_bytes": "two-shot per-byte cost at this world size",
    "multicast_bytes": "multicast per-byte cost at this world size",
}
TERM_PRIOR_SD = 0.7
FAMILIES = ("9", "10", "cdna3", "cdna4")
#: the families of each vendor, oldest first: an arch of neither vendor's fitted family takes the nearest of its own
VENDOR_FAMILIES = (("9", "10"), ("cdna3", "cdna4"))
UNSEEN_RULES = ("between", "nearest", "bandwidth")
#: the kernels the model has a form for, ``SCHEME/IMPLEMENTATION``: the engines' custom kernels and torch's
#: symmetric-memory ops of each scheme, and NCCL choosing its algorithm or forced to ring or NVLS (nccl-tests
#: sweeps run with ``NCCL_ALGO``)
KERNELS = (
    "one_shot/custom",
    "two_shot/custom",
    "multicast/custom",
    "one_shot/torch",
    "two_shot/torch",
    "multicast/torch",
    "library/nccl",
    "library/nccl_ring",
    "library/nccl_nvls",
    "library/rccl",
    *(f"two_shot/quickreduce_{level}" for level in catalog.QUICK_REDUCE_LEVELS),
)


def model_kernel(kernel: catalog.Kernel) -> str | None:
    """The model's name for an engine's kernel (``catalog.KERNELS``), or ``None`` where no form describes it
    (FlashInfer's, NCCL's on registered windows, the CPU ones)."""
    if kernel.scheme is None:
        return None
    name = f"{kernel.scheme.value}/{kernel.implementation}"
    return name if name in KERNELS else None


def _one_kernel(spec: catalog.AlgorithmSpec) -> str | None:
    """The one kernel of the model ``spec`` runs; a kernel no form describes (AITER's FlyDSL INT4, which vLLM
    runs for QuickReduce INT4 where AITER has it) does not count."""
    found = {model_kernel(k) for k in spec.kernels} - {None}
    return found.pop() if len(found) == 1 else None


#: the catalog's GPU algorithms that run one kernel of the model, and that kernel (vLLM's custom all-reduce
#: picks one of two per call: ``validate.engine_kernel``)
KERNEL_OF: dict[str, str] = {name: k for name, spec in catalog.SPECS.items() if (k := _one_kernel(spec)) is not None}


#: the catalog names the model plans with, one per kernel it plans: SGLang's, whose tables carry the launch
#: parameters (``blocks``), and NCCL above them
CANDIDATES = ("1shot_push", "2shot_pull", "2shot_pull_mc", "nccl")
#: on ROCm: SGLang's one-stage kernel, QuickReduce at full precision, RCCL above them; the model plans no
#: quantized level (lossy) unless asked to
ROCM_CANDIDATES = ("custom_ar_v1_1stage", "quick_ar_fp", "rccl")


def candidate(name: str) -> str | None:
    """The candidate of ``CANDIDATES`` that runs ``name``'s kernel (``2shot_pull`` for ``2shot_push``), if any."""
    kernel = KERNEL_OF.get(name)
    return next((c for c in CANDIDATES if kernel is not None and KERNEL_OF[c] == kernel), None)


def multicast_traffic(p: int) -> float:
    """Bytes through each rank's link, each way, per byte of message, of an NVLink SHARP all-reduce.

    Each rank owns an ``n/p`` share. ``multimem.ld_reduce``: the switch reads
    every share from every rank (each sends its whole buffer, ``n``) and each
    rank receives its reduced share (``n/p``); ``multimem.st``: each rank
    sends its share (``n/p``) and the switch delivers every share to every
    rank (``n`` in): ``(1 + 1/p) n`` each way.
    Two-shot over P2P moves ``2 (p-1)/p n``: multicast moves as much at 3
    ranks, less from 4 up (1.43x less at 6, 1.56x at 8) and more at 2 (1.5x), where the published
    sweeps find it slower than two-shot (vLLM PR #42324's Blackwell world size 2 sweep, DS2c).
    """
    return 1.0 + 1.0 / p


def family_name(name: str, family: str) -> str:
    return f"{name}@{family}"


def term_name(term: str, world_size: int) -> str:
    return f"{term}@ws{world_size}"


def family_of(arch: str) -> tuple[str, bool]:
    """The fitted family for ``arch`` and whether ``arch`` belongs to it (``False``: borrowed, unseen)."""
    if rocm.is_gfx(arch):
        facts = rocm.arch_facts(arch)
        family = f"cdna{facts.cdna}" if facts is not None else ""
        return (family, True) if family in FAMILIES else (VENDOR_FAMILIES[1][-1], False)
    major, _, minor = arch.partition(".")
    if major == "9":
        return "9", True
    if major == "10" and minor.isdigit() and int(minor) < 7:
        return "10", True
    try:
        newer = float(arch) >= 10.0
    except ValueError:
        raise ArtuneError(
            f"arch {arch!r}: expected a compute capability such as 9.0 or 10.7, or an AMD gfx arch such as gfx942"
        ) from None
    return ("10" if newer else "9"), False


def nearest_family(family: str, fitted: set[str]) -> str | None:
    """The fitted family of ``family``'s vendor nearest to it (``None`` where its vendor has none fitted)."""
    members = next(v for v in VENDOR_FAMILIES if family in v)
    have = [f for f in members if f in fitted]
    return min(have, key=lambda f: abs(members.index(f) - members.index(family))) if have else None


@dataclass(frozen=True)
class Machine:
    """What the forms need of a GPU: its family, NVLink GB/s per direction (or its mesh of links), multicast,
    and the unseen rule."""

    arch: str
    nvlink_GBps: float
    multicast: bool = True
    unseen_rule: str = "between"
    round_us: float | None = None  # a user's own figure overrides the family's
    links: int = 0  # a fully connected mesh: links per GPU, one to each peer (AMD); 0: a switch (NVLink)
    link_GBps: float = 0.0  # a mesh: GB/s per link, per direction

    @property
    def family(self) -> str:
        return family_of(self.arch)[0]

    @property
    def seen(self) -> bool:
        return family_of(self.arch)[1]

    def bandwidth(self, p: int) -> float:
        """GB/s per direction a GPU has towards its ``p - 1`` peers: the switch's, or one link per peer."""
        return min(p - 1, self.links) * self.link_GBps if self.links else self.nvlink_GBps


def round_for(theta: Theta, machine: Machine, family_bandwidth: Mapping[str, float]) -> np.ndarray:
    """A round's latency (us) on ``machine``, per replicate.

    A fitted family: its own ``round@F``. An arch of no fitted family
    extrapolates from the newest, ``round = round@10 (B / B_10)^(g beta)``,
    where ``beta`` is the power law in NVLink bandwidth through the two fitted
    families (the round latency grew with the link from Hopper to Blackwell)
    and ``g`` says how much of that trend carries on: ``nearest`` g = 0 (the
    newest family's latency), ``bandwidth`` g = 1 (the trend holds),
    ``between`` g = ``unseen:share`` (1/2 in the central fit, drawn uniform
    in [0, 1] per replicate: nothing measured says which).
    """
    if machine.round_us is not None:
        return np.full_like(theta["round@10"], machine.round_us)
    own = theta[family_name("round", machine.family)]
    if machine.seen or machine.family in VENDOR_FAMILIES[1]:
        return own  # an AMD arch of no fitted family: the newest's (one measured AMD trend is no trend)
    share = {"nearest": 0.0, "bandwidth": 1.0}.get(machine.unseen_rule)
    if share is None and machine.unseen_rule != "between":
        raise ArtuneError(f"unseen rule {machine.unseen_rule!r}: expected one of {', '.join(UNSEEN_RULES)}")
    g = theta.get("unseen:share", np.full_like(own, 0.5)) if share is None else share
    b9, b10 = family_bandwidth["9"], family_bandwidth["10"]
    beta = np.log(theta["round@10"] / theta["round@9"]) / math.log(b10 / b9)
    return theta["round@10"] * (machine.nvlink_GBps / b10) ** (g * beta)


def _get(theta: Theta, name: str, like: np.ndarray) -> np.ndarray:
    value = theta.get(name)
    return np.ones_like(like) if value is None else value


def kernel_lines(
    theta: Theta,
    kernel: str,
    machine: Machine,
    p: int,
    mode: str,
    family_bandwidth: Mapping[str, float],
) -> list[tuple[np.ndarray, np.ndarray]]:
    """The kernel's lines ``(us at 0 bytes, us per byte)``, each of shape ``(b,)``; its time is their minimum."""
    fam = machine.family
    scheme, _, impl = kernel.partition("/")
    bw = theta[family_name("link", fam)] * machine.bandwidth(p) * 1e3  # bytes per us
    per_byte = 1.0 / bw
    eager = mode == "eager"
    rnd = round_for(theta, machine, family_bandwidth)
    if scheme == "library":
        extra = theta["nccl:eager"] if eager else 0.0 * bw
        bus = 2 * (p - 1) / p
        base, slope_factor = (theta["rccl:base"], theta["rccl:bytes"]) if impl == "rccl" else (1.0, 1.0)
        ring = [
            (
                theta[f"nccl:{proto}"] * base + 2 * (p - 1) * theta[f"nccl:{proto}_hop"] * rnd + extra,
                bus * theta[f"nccl:{slope}"] * slope_factor * per_byte,
            )
            for proto, slope in (("ll", "ll_bytes"), ("ll128", "ll128_bytes"), ("simple", "ring_bytes"))
        ]
        nvls = [(theta[f"nccl:{k}"] + extra, theta[f"nccl:{k}_bytes"] * per_byte) for k in ("nvls_small", "nvls")]
        if impl == "nccl_nvls":
            return nvls
        if impl in ("nccl_ring", "rccl") or not machine.multicast:
            return ring
        return ring + nvls
    if eager:
        rnd = rnd * theta["eager_round"] * _get(theta, term_name("eager_round", p), rnd)
    else:
        rnd = rnd * _get(theta, term_name("graph_round", p), rnd)
    if scheme == "one_shot":
        rounds, moved = 1.0, float(p - 1)  # bytes through the link per byte of message
    elif scheme == "two_shot":
        rounds, moved = 2.0, 2 * (p - 1) / p * _get(theta, term_name("two_shot_bytes", p), rnd)
    elif scheme == "multicast":
        rounds, moved = theta["mc_rounds"], multicast_traffic(p) * _get(theta, term_name("multicast_bytes", p), rnd)
    else:
        raise KeyError(kernel)
    if impl.startswith("quickreduce_"):
        return _quickreduce_line(theta, impl.removeprefix("quickreduce_"), rnd, moved * per_byte)
    efficiency = 1.0 if kernel == "one_shot/custom" else theta[f"{kernel}:bytes"]
    slope = moved * efficiency * per_byte
    if impl == "torch":
        # torch launches a fixed grid whatever the GPU: the slower of the link and those blocks
        rounds = rounds + theta[f"{kernel}:rounds"]
        slope = np.maximum(slope, moved / (theta[f"{kernel}:GBps"] * 1e3))
    return [(rnd * rounds, slope * np.ones_like(rnd))]


def _quickreduce_line(
    theta: Theta, level: str, rnd: np.ndarray, fp16_slope: np.ndarray
) -> list[tuple[np.ndarray, np.ndarray]]:
    """QuickReduce at ``level``: a two-shot sending its codec's share of fp16's bytes, with the codec's extra
    rounds and throughput where the level quantizes; ``fp16_slope`` is a full-precision two-shot's per byte."""
    ratio = catalog.QUICK_REDUCE_LEVELS[level][1]
    rounds = 2.0 + theta["two_shot/quickreduce:rounds"]
    slope = fp16_slope * ratio * theta["two_shot/quickreduce:bytes"]
    if level != "fp":
        rounds = rounds + theta["quickreduce:codec_rounds"]
        slope = slope + 1.0 / (theta["quickreduce:codec_GBps"] * 1e3)
    return [(rnd * rounds, slope * np.ones_like(rnd))]


def kernel_times(
    theta: Theta,
    kernel: str,
    machine: Machine,
    p: int,
    sizes: Sequence[float] | np.ndarray,
    mode: str,
    family_bandwidth: Mapping[str, float],
) -> np.ndarray:
    """Predicted microseconds, shape ``(b, len(sizes))``, without the per-call overhead common to all kernels."""
    n = np.asarray(sizes, dtype=float)[None, :]
    lines = kernel_lines(theta, kernel, machine, p, mode, family_bandwidth)
    return np.minimum.reduce([a[:, None] + s[:, None] * n for a, s in lines])


def first_crossing(
    lead: tuple[np.ndarray, np.ndarray], rival: list[tuple[np.ndarray, np.ndarray]], lo: float, hi: float
) -> np.ndarray:
    """Where the ``lead`` line becomes slower than the minimum of ``rival``'s lines for good, clipped to
    ``[lo, hi]``: the intersection with the first rival line that is shallower (``hi`` when none is).

    "For good" rather than "first": a steeper rival that is faster at small sizes does not end the lead's
    band at large ones, and the answer moves continuously with the parameters (a fit cannot sit on a cliff).
    """
    a1, s1 = lead
    out = np.full_like(a1, hi)
    for a, s in rival:
        with np.errstate(divide="ignore", invalid="ignore"):
            cross = np.where(s < s1, (a - a1) / (s1 - s), hi)
        out = np.minimum(out, cross)
    return np.clip(out, lo, hi)


# ------------------------------------------------------------------ the fitted model


@dataclass(frozen=True)
class GpuFit:
    """The fitted parameters: central values, bootstrap replicates and what they were fitted on."""

    names: tuple[str, ...]
    central: np.ndarray  # (k,)
    replicates: np.ndarray  # (b, k)
    family_bandwidth: Mapping[str, float] = field(hash=False)
    crossover_residuals: tuple[float, ...] = ()  # log(pred / published) of the training crossovers
    overhead_us: Mapping[str, float] = field(default_factory=dict, hash=False)  # per "family/mode"
    source: str = ""
    offsets: Mapping[str, float] = field(default_factory=dict, hash=False)  # per fitted sweep, us
    #: what the blind-arch folds said (``artune.costmodel.blind``): the claims' weight, the interval factor and
    #: its coverage, the copy rules; empty for a fit that was not validated by arch
    blind: Mapping[str, Any] = field(default_factory=dict, hash=False)

    def theta(self, which: str = "central") -> dict[str, np.ndarray]:
        """The parameters as ``name -> (b,)`` (``central``: b = 1; ``replicates``: the bootstrap)."""
        values = self.central[None, :] if which == "central" else self.replicates
        return {name: values[:, i] for i, name in enumerate(self.names)}

    def value(self, name: str) -> float:
        return float(self.central[self.names.index(name)])

    def to_json(self) -> str:
        data: dict[str, Any] = {
            "version": VERSION,
            "source": self.source,
            "family_bandwidth": dict(self.family_bandwidth),
            "overhead_us": dict(self.overhead_us),
            "offsets": {k: float(f"{v:.6g}") for k, v in self.offsets.items()},
            "names": list(self.names),
            "central": [float(f"{v:.6g}") for v in self.central],
            "crossover_residuals": [round(v, 4) for v in self.crossover_residuals],
            "blind": dict(self.blind),
        }
        rows = ",\n".join("  " + json.dumps([float(f"{v:.5g}") for v in row]) for row in self.replicates)
        head = json.dumps(data, indent=1)
        return f'{head[:-2]},\n "replicates": [\n{rows}\n ]\n}}\n'  # one replicate per line

    @classmethod
    def from_json(cls, text: str, origin: str = "gpu-fit.json") -> GpuFit:
        try:
            data = json.loads(text)
            names = tuple(data["names"])
            central = np.array(data["central"], dtype=float)
            replicates = np.array(data["replicates"], dtype=float).reshape(-1, len(names))
            return cls(
                names,
                central,
                replicates,
                {k: float(v) for k, v in data["family_bandwidth"].items()},
                tuple(float(v) for v in data.get("crossover_residuals", ())),
                {k: float(v) for k, v in data.get("overhead_us", {}).items()},
                str(data.get("source", "")),
                {k: float(v) for k, v in data.get("offsets", {}).items()},
                dict(data.get("blind", {})),
            )
        except (ValueError, KeyError, TypeError) as err:
            raise ArtuneError(f"{origin}: not a GPU fit file ({err}); rerun bench/calibrate_gpu.py --write") from None


FIT_FILE = "gpu-fit.json"


def bundled_fit() -> GpuFit:
    """The fit ``bench/calibrate_gpu.py --write`` stored with the package."""
    path = resources.files("artune.costmodel").joinpath(FIT_FILE)
    return GpuFit.from_json(path.read_text(encoding="utf-8"), FIT_FILE)
