"""The device check: everything one GPU (or one node) can show about artune's CUDA path, as a Markdown report.

    python bench/gpu_check.py [--out DIR] [--budget SECONDS]

Without a CUDA device it says so and exits 0. With one it runs, each step
bounded and recorded (a failure is reported, never hides the rest):

1. the GPU facts and which torch.ops.symm_mem ops this torch has;
2. world size 1: a Communicator on a ``cpu:gloo,cuda:nccl`` group (its
   algorithms, why each missing one is missing, the start-up self-check);
   every CUDA algorithm eagerly and replayed from a CUDA graph against the
   exact sum; automatic dispatch captured in a graph; an unseen call refused
   inside a real capture; graph timing against event timing at a few sizes;
3. two ranks on one GPU (NCCL refuses a duplicate GPU): what the Communicator
   says there;
4. the ``artune`` torch.distributed backend: CUDA tensors through its inner NCCL group, under DDP too;
5. ``artune tune --device cuda`` end to end (world size 1 on one GPU; on a
   node, every world size of 2, 4, 8 that fits), then ``artune explain`` on
   the table.

The report is rewritten after every step (``DIR/gpu-check.md``), so a run
cut short still leaves what it found; the tune's table, report and up to
three latency plots are copied beside it as ``tune-*`` (at most 8 files in
all, the device tool's limit). Designed to finish within 8 minutes on
one GPU (``--budget`` is the tune's measuring budget per world size and mode).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from artune.launch import RankContext, run_ranks  # noqa: E402

SIZES = (4 << 10, 256 << 10, 4 << 20)
BACKEND = "cpu:gloo,cuda:nccl"


class Report:
    """Markdown lines, written out after every step."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lines: list[str] = []
        self.started = time.monotonic()

    def add(self, *lines: str) -> None:
        self.lines.extend(lines)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text("\n".join(self.lines) + "\n", encoding="utf-8")
        for line in lines:
            print(line, flush=True)

    def step(self, title: str, fn: Any, *args: Any) -> Any:
        began = time.monotonic()
        self.add("", f"## {title}", "")
        try:
            value = fn(*args)
        except Exception as err:  # a failing step is a finding, not the end of the check
            self.add(f"**FAILED** after {time.monotonic() - began:.0f}s: `{type(err).__name__}: {err}`"[:3000])
            self.add("", "```", traceback.format_exc()[-3000:], "```")
            return None
        self.add("", f"({time.monotonic() - began:.0f}s)")
        return value


# ------------------------------------------------------------------ rank functions (module level: spawned)


def _exact(world_size: int, numel: int, dtype: torch.dtype) -> tuple[torch.Tensor, list[torch.Tensor]]:
    inputs = [((torch.arange(numel) * 7 + r * 13) % 17 - 8).to(dtype) for r in range(world_size)]
    total = torch.stack([x.to(torch.int64) for x in inputs]).sum(0).to(dtype)
    return total, inputs


def _gpu_rank(ctx: RankContext) -> list[str]:
    """One rank per GPU (or several on one GPU): the Communicator, each CUDA algorithm, the timers."""
    import artune
    from artune.measure.cuda_timing import _capture
    from artune.measure.harness import make_timer, measure
    from artune.measure.timers import TimingSpec
    from artune.table.bundled import cpu_default

    out: list[str] = []
    with artune.Communicator(table=cpu_default(), timeout=60) as comm:
        out.append(f"- algorithms: {', '.join(comm.algorithms)}; CUDA baseline {comm.baseline_for('cuda')}")
        out.append(f"- CUDA table: {comm.table_for('cuda').name}")
        out.append(f"- NVLink multicast on every rank: {comm.multicast}")
        for name, why in sorted(comm.unavailable.items()):
            out.append(f"- not available: `{name}`: {why}")
        for name, why in sorted(comm.disabled.items()):
            out.append(f"- **self-check FAILED**: `{name}`: {why}")
        if not comm.disabled:
            out.append("- start-up self-check: every algorithm passed (CUDA ones with CUDA tensors)")
        cuda_names = [n for n in comm.algorithms if n in comm.available(torch.bfloat16, "sum", "cuda")]
        out.append("")
        out.append("| algorithm | dtype | elements | eager | graph replay |")
        out.append("|---|---|---:|---|---|")
        for name in cuda_names:
            for dtype in (torch.bfloat16, torch.float32):
                for numel in (1024, 65536 + 512):
                    total, inputs = _exact(ctx.world_size, numel, dtype)
                    want = total.cuda()
                    x = inputs[ctx.rank].cuda()
                    try:
                        comm.all_reduce(x, algorithm=name)
                        eager = "ok" if torch.equal(x, want) else f"WRONG ({int((x != want).sum())})"
                    except Exception as err:
                        eager = f"raised {type(err).__name__}: {err}"[:200]
                    y = inputs[ctx.rank].cuda()
                    try:
                        comm.all_reduce(y.clone(), algorithm=name)  # seen outside the capture first
                        graph = _capture(lambda y=y, name=name: comm.all_reduce(y, algorithm=name), 1)
                        y.copy_(inputs[ctx.rank].cuda())
                        graph.replay()
                        torch.cuda.synchronize()
                        replayed = "ok" if torch.equal(y, want) else f"WRONG ({int((y != want).sum())})"
                    except Exception as err:
                        replayed = f"raised {type(err).__name__}: {err}"[:200]
                    out.append(f"| {name} | {str(dtype)[6:]} | {numel} | {eager} | {replayed} |")
        # automatic dispatch inside a capture, and an unseen call refused there
        z = torch.ones(4096, dtype=torch.bfloat16, device="cuda")
        try:
            comm.all_reduce(z)
        except artune.ArtuneError as err:  # two ranks on one GPU: nothing reduces CUDA tensors, and it says why
            out.append(f"- a CUDA all_reduce: refused: {str(err)[:300]}")
            return out if ctx.rank == 0 else []
        z.fill_(1)
        try:
            graph = _capture(lambda: comm.all_reduce(z), 1)
            z.fill_(1)
            graph.replay()
            torch.cuda.synchronize()
            ok = torch.equal(z, torch.full_like(z, float(ctx.world_size)))
            out.append(
                f"- automatic dispatch captured in a graph ({comm.decide(z).algorithm} eager): "
                f"{'ok' if ok else 'WRONG'}"
            )
        except Exception as err:
            out.append(f"- automatic dispatch captured in a graph: raised {type(err).__name__}: {err}"[:300])
        try:
            fresh = torch.ones(1000 + 8, dtype=torch.bfloat16, device="cuda")
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, capture_error_mode="thread_local"):
                comm.all_reduce(fresh)
            out.append("- unseen call inside a capture: NOT refused (a bug)")
        except artune.ArtuneError as err:
            out.append(f"- unseen call inside a capture: refused: {str(err)[:160]}")
        except Exception as err:
            out.append(f"- unseen call inside a capture: raised {type(err).__name__}: {err}"[:300])
        if cuda_names:
            try:
                out += _overhead(comm)
            except Exception as err:
                out.append(f"- host time per call: raised {type(err).__name__}: {err}"[:300])
        # graph timing against event timing
        if cuda_names:
            out += [
                "",
                "| size | algorithm | events median us | graph median us | graph/events |",
                "|---|---|---:|---:|---:|",
            ]
            figures: dict[tuple[str, int, str], float] = {}
            for spec in (TimingSpec("events"), TimingSpec("graph", 10, False)):
                found = measure(
                    comm,
                    cuda_names,
                    list(SIZES),
                    dtype=torch.bfloat16,
                    budget_s=0.3,
                    device="cuda",
                    timer=make_timer(spec),
                )
                for m in found:
                    figures[(m.candidate.algorithm, m.size_bytes, spec.timer)] = (
                        m.time_us if m.status == "ok" else float("nan")
                    )
                    if m.status != "ok":
                        out.append(
                            f"- {spec.timer} {m.candidate.algorithm} {m.size_bytes} B: {m.status} {m.error}"[:300]
                        )
            for size in SIZES:
                for name in cuda_names:
                    e, g = (
                        figures.get((name, size, "events"), float("nan")),
                        figures.get((name, size, "graph"), float("nan")),
                    )
                    out.append(f"| {size} | {name} | {e:.2f} | {g:.2f} | {g / e:.2f} |")
    return out if ctx.rank == 0 else []


def _overhead(comm: Any, nbytes: int = 4096, calls: int = 200, turns: int = 9, device: str = "cuda") -> list[str]:
    """Host time per eager call, back to back (the GPU waits on the host at this size): the table of
    ``bench/bench_call_overhead.py`` with CUDA tensors (each route's bound call, its agreement round, the
    Communicator's call, the general path, NCCL called directly), plus the automatic call and the capture
    test alone; then the time outside each route's agreement and bound call, timed inside each call."""
    import importlib.util
    import statistics

    spec = importlib.util.spec_from_file_location("bench_call_overhead", ROOT / "bench" / "bench_call_overhead.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    from artune.communicator.fastpath import capture_test

    x = torch.ones(nbytes // 2, dtype=torch.bfloat16, device=device)
    sync = torch.cuda.synchronize if device == "cuda" else lambda: None
    ways = bench.ways_for(comm, x)
    comm.all_reduce(x)  # first sight of the automatic call
    ways[(f"comm.all_reduce(x) (automatic: {comm.decide(x).algorithm})", "comm")] = lambda: comm.all_reduce(x)
    capturing = capture_test()
    if capturing is not None:
        ways[("the capture test alone (torch._C._cuda_isCurrentStreamCapturing)", "bound")] = capturing
    per_turn = bench.calls_per_turn(ways, calls, sync)
    result = bench.slowest(bench.time_ways(ways, turns, per_turn, sync))
    lines = ["", f"Host time per eager call, {nbytes} B bf16, us, median of {turns} turns:", ""]
    lines += bench.table(result, per_turn)
    outside = bench.time_outside(comm, x, turns, per_turn, sync)
    outside = bench.slowest({(k, ""): v for k, v in outside.items()})
    lines += ["", "Time outside each route's agreement and bound call, us per call (median per turn, then over turns):"]
    lines += ["", "| route, way | us |", "|---|---:|"]
    lines += [f"| {k[0]} | {statistics.median(v):.2f} |" for k, v in outside.items()]
    import cProfile
    import io
    import pstats

    profile = cProfile.Profile()
    profile.enable()
    for _ in range(2000):
        comm.all_reduce(x)
    sync()
    profile.disable()
    text = io.StringIO()
    pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(18)
    lines += ["", "cProfile of 2000 automatic calls, by own time:", "", "```", text.getvalue()[-5000:], "```"]
    return lines


def _backend_rank(ctx: RankContext) -> list[str]:
    """The ``artune`` torch.distributed backend with CUDA tensors: its inner NCCL group, under DDP too."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    out: list[str] = []
    want = float(sum(range(1, ctx.world_size + 1)))
    x = torch.full((1000,), float(ctx.rank + 1), device="cuda")
    dist.all_reduce(x)
    ok = bool((x == want).all())
    out.append(f"- dist.all_reduce of a CUDA tensor on the artune group: {'ok' if ok else 'WRONG'}")
    y = torch.full((1000,), float(ctx.rank + 1))
    dist.all_reduce(y)
    out.append(f"- and of a CPU tensor (through the Communicator): {'ok' if bool((y == want).all()) else 'WRONG'}")
    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Linear(64, 64).cuda(), device_ids=[torch.cuda.current_device()])
    model(torch.randn(8, 64, device="cuda")).square().sum().backward()
    grad = model.module.weight.grad
    ok = grad is not None and bool(torch.isfinite(grad).all()) and float(grad.abs().sum()) > 0
    out.append(f"- DDP backward on CUDA over the artune group: {'ok' if ok else 'WRONG'}")
    return out if ctx.rank == 0 else []


def backend(world_size: int, timeout: float) -> None:
    REPORT.add(*run_ranks(_backend_rank, world_size, timeout=timeout, backend="artune")[0])


# ------------------------------------------------------------------ steps


def facts() -> None:
    from artune.algorithms.cuda import rules
    from artune.gpufacts import gpu_facts

    f = gpu_facts()
    REPORT.add(f"- {f.describe()}", f"- arch (table platform): cuda {f.capability}; fingerprint {f.fingerprint()}")
    probe = rules.SymmMemFacts.probe(1, True)
    REPORT.add(f"- torch.ops.symm_mem ops present: {', '.join(sorted(probe.ops)) or 'none'}")
    for name in rules.OPS:
        for ws in (1, max(2, f.count)):
            why = rules.open_unavailable(name, dataclasses.replace(probe, world_size=ws))
            REPORT.add(f"- `{name}` at world size {ws}: {'can open' if why is None else why}")


def ranks(world_size: int, timeout: float) -> None:
    lines = run_ranks(_gpu_rank, world_size, timeout=timeout, backend=BACKEND)[0]
    REPORT.add(*lines)


def tune(world_sizes: list[int], budget: float, out: Path, timeout: float) -> None:
    """The tune writes into a scratch folder; its table, report and plots are copied next to the report
    (the device tool brings back at most 8 files)."""
    work = Path(tempfile.mkdtemp(prefix="artune-gpu-check-"))
    table = work / "table.toml"
    cmd = [
        sys.executable,
        "-m",
        "artune",
        "tune",
        "--device",
        "cuda",
        "--quick",
        "--budget",
        str(budget),
        "--out",
        str(work),
        "--no-install",
        "--no-progress",
    ]
    for ws in world_sizes:
        cmd += ["--world-size", str(ws)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT / "src"), os.environ.get("PYTHONPATH"))))}
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    REPORT.add(
        f"`{' '.join(cmd[1:])}`: exit {done.returncode}", "", "```", done.stdout[-4000:], done.stderr[-3000:], "```"
    )
    for name in ("table.toml", "report.md", *(p.name for p in sorted(work.glob("latency-*.png"))[:3])):
        if (work / name).exists():
            shutil.copy(work / name, out / f"tune-{name}")
    if table.exists():
        REPORT.add("", "table.toml (also tune-table.toml; tune-report.md is the tune's report):", "")
        REPORT.add("```toml", table.read_text()[:6000], "```")
        for mode in ("graph", "eager"):
            ex = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "artune",
                    "explain",
                    "--table",
                    str(table),
                    "--world-size",
                    str(max(world_sizes)),
                    "--size",
                    "64KiB",
                    "--mode",
                    mode,
                ],
                capture_output=True,
                text=True,
                timeout=60,
                env=env,
            )
            REPORT.add(
                "",
                f"`artune explain ... --size 64KiB --mode {mode}`: exit {ex.returncode}",
                "",
                "```",
                (ex.stdout + ex.stderr)[-2000:],
                "```",
            )


def main() -> int:
    global REPORT
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=os.environ.get("OUT", "gpu-check-out"), help="report folder")
    parser.add_argument("--budget", type=float, default=8.0, help="tune budget per world size and mode (s)")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print(
            f"gpu_check: no CUDA device here (torch {torch.__version__}, torch.cuda.is_available() is False); "
            "nothing to check. Run it on a GPU host."
        )
        return 0
    out = Path(args.out)
    REPORT = Report(out / "gpu-check.md")
    count = torch.cuda.device_count()
    REPORT.add(
        f"# artune GPU check, {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC",
        "",
        f"torch {torch.__version__}, CUDA {torch.version.cuda}, {count} GPU(s). Command: "
        f"`python bench/gpu_check.py {' '.join(sys.argv[1:])}`",
    )
    REPORT.step("GPU facts", facts)
    REPORT.step("World size 1: Communicator, correctness (eager and graph), timing", ranks, 1, 150.0)
    if count == 1:
        REPORT.step("Two ranks on one GPU", ranks, 2, 90.0)
    else:
        REPORT.step(f"World size {count}: Communicator, correctness, timing", ranks, count, 240.0)
    REPORT.step("The artune torch.distributed backend with CUDA tensors", backend, min(count, 8), 120.0)
    sizes = [ws for ws in (2, 4, 8) if ws <= count] or [1]
    REPORT.step(f"artune tune --device cuda, world sizes {sizes}", tune, sizes, args.budget, out, 210.0)
    REPORT.add("", f"Total {time.monotonic() - REPORT.started:.0f}s.")
    return 0


REPORT: Report

if __name__ == "__main__":
    sys.exit(main())
