"""The engines' own benchmark commands that would measure moved ranges, their arguments computed from the ranges.

A moved range is answered by a sweep with sizes on both sides of each of its
bounds and one inside it (``reach``). Each engine's benchmark takes sizes in
its own terms, as its argument parser reads them (tests/test_review.py parses
the printed commands with an excerpt of each parser):

- vLLM, ``benchmarks/kernels/benchmark_device_communicators.py``: bf16
  tensors ``(seq_len, 8192)``, so ``--sequence-lengths`` are bytes / 16 KiB;
  it times graphs of 10 calls (graph mode) and writes ``--output-json``;
- SGLang, ``python/sglang/jit_kernel/benchmark/bench_custom_all_reduce.py``:
  a fixed size list (4 KiB to 32 MiB), SGLang's own dispatch (its ``JIT``
  column) against NCCL, in CUDA graphs; it prints its table, which the shell
  saves. It times what the installed SGLang runs, not each algorithm, so an
  SGLang question also prints artune's tuner, which times every algorithm
  SGLang's rows name in both modes. Bounds its list cannot reach are named
  (``missing``);
- TensorRT-LLM, ``tests/microbenchmarks/all_reduce.py``: ``--range
  MIN,MAX,RATIO`` in elements, a geometric series, so one command per series
  of probes that share an odd factor; ``--enable_cudagraph`` for graph mode,
  ``--save_csv`` for the file;
- artune's own tables: ``artune tune --device cuda``, whose logs
  ``--measured`` reads.

Probe sizes are multiples of 16 KiB (vLLM's step, and the grid the others
share here): per range, the first and last such size inside it, the nearest
outside each bound, and the powers of two between.
"""

from __future__ import annotations

from collections.abc import Sequence

from artune.review.types import BenchCommand
from artune.sizes import format_size, format_span
from artune.table.types import MODES

BF16 = 2
VLLM_ROW = 8192 * BF16  # one sequence of vLLM's benchmark tensor (seq_len, 8192) bf16
TOP = 256 << 20  # an open-ended range is probed up to 8x its start, and no further than this
VLLM_BENCH = "benchmarks/kernels/benchmark_device_communicators.py"
SGLANG_BENCH = "python/sglang/jit_kernel/benchmark/bench_custom_all_reduce.py"
TRTLLM_BENCH = "tests/microbenchmarks/all_reduce.py"
#: the sizes SGLang's benchmark sweeps (its MESSAGE_SIZES_BYTES)
SGLANG_SIZES = tuple(1024 * kb for kb in (4, 16, 64, 128, 192, 256, 384, 512, 640, 768, 896, 1024, 2048, 3072))
SGLANG_SIZES += tuple(mib << 20 for mib in (4, 8, 16, 32))

Range = tuple[int, int | None]
#: the GPUs one host holds: more ranks than this run across hosts
HOST_GPUS = 8
RENDEZVOUS_PORT = 29500


def hosts_for(world_size: int, hosts: int = 1) -> int:
    """The hosts ``world_size`` ranks span: ``hosts``, or the fewest that split them evenly with no more than
    ``HOST_GPUS`` on each where one host cannot hold them."""
    if hosts > 1 or world_size <= HOST_GPUS:
        return hosts
    return next(h for h in range(2, world_size + 1) if world_size % h == 0 and world_size // h <= HOST_GPUS)


def launch(world_size: int, hosts: int = 1) -> tuple[str, ...]:
    """torchrun for ``world_size`` ranks over ``hosts`` hosts (``hosts_for``): across hosts, the same line on
    each host, which meet at ``$MASTER_ADDR`` (the first host's address, which each host sets)."""
    hosts = hosts_for(world_size, hosts)
    if hosts == 1:
        return ("torchrun", f"--nproc_per_node={world_size}")
    return (
        "torchrun",
        f"--nnodes={hosts}",
        f"--nproc_per_node={world_size // hosts}",
        "--rdzv_backend=c10d",
        f"--rdzv_endpoint=$MASTER_ADDR:{RENDEZVOUS_PORT}",
        "--rdzv_id=artune",
    )


def reach(sizes: Sequence[int], ranges: Sequence[Range]) -> tuple[str, ...]:
    """What ``sizes`` lack to answer ``ranges``: a size inside each, below each start, above each end."""
    out: list[str] = []
    for lo, hi in ranges:
        inside = [n for n in sizes if lo <= n and (hi is None or n <= hi)]
        if not inside:
            out.append(f"no size in {format_span(lo, hi)}")
        if lo > 0 and not any(n < lo for n in sizes):
            nice = not format_size(lo - 1).isdigit()  # (640KiB, ...: "at or below 640KiB"; [8MiB, ...: "below 8MiB"
            out.append(f"no size at or below {format_size(lo - 1)}" if nice else f"no size below {format_size(lo)}")
        if hi is not None and not any(n > hi for n in sizes):
            out.append(f"no size above {format_size(hi)}")
    return tuple(dict.fromkeys(out))


def probes(ranges: Sequence[Range], step: int = VLLM_ROW) -> tuple[int, ...]:
    """Multiples of ``step`` that reach both sides of every bound of ``ranges`` and sit inside each range."""
    out: set[int] = set()
    for lo, hi in ranges:
        first = max(step, -(-lo // step) * step)  # the first multiple inside, at or above lo
        end = max(first, min(TOP, 8 * first)) if hi is None else hi
        last = end // step * step
        if lo > 0 and first - step >= step:
            out.add(first - step)  # the nearest below the range
        if hi is not None:
            out.add(last + step)  # the nearest above it
        if first <= last:
            out |= {first, last}
            power = 1 << first.bit_length()
            while power < last:
                out.add(power)
                power <<= 1
    return tuple(sorted(out))


def vllm_command(world_size: int, ranges: Sequence[Range], output: str, hosts: int = 1) -> BenchCommand:
    """vLLM's device-communicator benchmark over the probes of ``ranges`` (graph mode: it times CUDA graphs),
    its ranks on ``hosts`` hosts."""
    sizes = probes(ranges)
    argv = (*launch(world_size, hosts), VLLM_BENCH, "--sequence-lengths")
    argv += (*(str(n // VLLM_ROW) for n in sizes), "--output-json", output)
    return BenchCommand("vllm", argv, ("graph",), sizes, output, missing=reach(sizes, ranges))


def sglang_command(world_size: int, ranges: Sequence[Range], output: str, hosts: int = 1) -> BenchCommand:
    """SGLang's custom all-reduce benchmark at ``world_size`` on ``hosts`` hosts: its own fixed sizes, graph
    mode, printed."""
    argv = (*launch(world_size, hosts), SGLANG_BENCH, "--dtype", "bfloat16")
    near = tuple(n for n in SGLANG_SIZES if any(_near(n, r) for r in ranges))
    return BenchCommand("sglang", argv, ("graph",), near, output, stdout=True, missing=reach(SGLANG_SIZES, ranges))


def _near(size: int, span: Range) -> bool:
    lo, hi = span
    return lo // 2 <= size and (hi is None or size <= 2 * hi)


def trtllm_commands(world_size: int, modes: Sequence[str], ranges: Sequence[Range], output: str) -> list[BenchCommand]:
    """TensorRT-LLM's all-reduce microbenchmark: per mode, one ``--range`` series per odd factor of the probes."""
    sizes = probes(ranges)
    series: dict[int, list[int]] = {}
    for n in sizes:
        elements = n // BF16
        odd = elements // (elements & -elements)
        series.setdefault(odd, []).append(elements)
    out: list[BenchCommand] = []
    for mode in modes:
        for i, (_, elements) in enumerate(sorted(series.items())):
            name = output.replace(".csv", f"-{mode}{f'-{i + 1}' if len(series) > 1 else ''}.csv")
            # the default mode appends min*ratio^k while it is below MAX: MAX one past the largest
            argv = ("mpirun", "-n", str(world_size), "python", TRTLLM_BENCH)
            argv += ("--range", f"{min(elements)},{max(elements) + 1},2")
            argv += (*(["--enable_cudagraph"] if mode == "graph" else []), "--save_csv", name)
            measured = tuple(e * BF16 for e in _series(min(elements), max(elements) + 1, 2))
            out.append(BenchCommand("trtllm", argv, (mode,), measured, name))
    return out


def _series(lo: int, hi: int, ratio: int) -> list[int]:
    """The element counts TensorRT-LLM's default mode sweeps for ``--range lo,hi,ratio``."""
    out, size = [], lo
    while size < hi:
        out.append(size)
        size *= ratio
    return out


def artune_command(world_size: int, modes: Sequence[str], output: str) -> BenchCommand:
    """artune's own tuner on the target GPU: its logs are what ``--measured`` reads."""
    argv = ("artune", "tune", "--device", "cuda", "--world-size", str(world_size))
    argv += (*(a for m in modes for a in ("--mode", m)), "--out", output, "--no-install")
    return BenchCommand("artune", argv, tuple(modes), (), output)


def commands(
    engine: str, arch: str, world_size: int, ranges: Sequence[tuple[str, int, int | None]], hosts: int = 1
) -> tuple[BenchCommand, ...]:
    """The commands that answer ``ranges`` (``(mode, lo, hi)``) of ``engine`` at ``(arch, world_size)``, the
    ranks on ``hosts`` hosts.

    Their output files are named ``artune-evidence/ARCH-wsN-ENGINE.EXT``
    (``ARCH-wsN-hH-ENGINE.EXT`` across H hosts): the review reads the arch
    of an evidence file from that name.
    """
    from artune.formats.registry import engine as plugin
    from artune.formats.registry import names

    across = f"-h{hosts}" if hosts > 1 else ""
    stem = f"artune-evidence/{arch}-ws{world_size}{across}-{engine or 'artune'}"
    bench = plugin(engine).bench if engine in names() else None
    if bench is not None:
        return tuple(bench(arch, world_size, ranges, hosts, stem))
    return (artune_command(world_size, modes_of(ranges), stem),)


def spans(ranges: Sequence[tuple[str, int, int | None]]) -> list[Range]:
    """The byte ranges of ``(mode, lo, hi)`` ranges, each once, by their start."""
    return sorted({(lo, hi) for _, lo, hi in ranges}, key=lambda r: r[0])


def modes_of(ranges: Sequence[tuple[str, int, int | None]]) -> tuple[str, ...]:
    """The modes ``(mode, lo, hi)`` ranges name, in ``MODES``' order."""
    return tuple(m for m in MODES if any(mode == m for mode, _, _ in ranges))
