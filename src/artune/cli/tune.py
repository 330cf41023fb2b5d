"""``artune tune`` and ``artune verify``: measure this machine into a table, and re-check a table.

``artune tune --world-size N`` spawns N local ranks (or, under ``torchrun``,
runs in place), measures every algorithm available here, derives one plan
per world size and writes into ``--out`` (default
``./artune-tune-<machine fingerprint>``):

- ``table.toml``: the measured table (it passes ``artune check`` for the
  world sizes tuned);
- ``measurements-ws<N>.jsonl``: the append-only measurement log per world
  size; a rerun with the same ``--out`` resumes it and re-measures nothing
  already there;
- ``journal-ws<N>.jsonl``: what a replay needs besides the log (the
  settings, and the seconds each call was counted as): ``artune tune
  --replay DIR`` derives the same table again, measuring nothing;
- ``report.md``, ``report.html``, ``latency-ws<N>.png``, ``speedup-ws<N>.png``.

Before it ships, the table duels every fixed rule at fresh sizes and is
repaired where one wins, every band is held to the evidence at its own
sizes, and the run's own checks (the duel and the held-out regret) decide
whether the derived table or a fixed rule ships (docs/tune.md). It then
installs the table as this machine's (the Communicator's default) unless
``--no-install``. When the run's checks contradict each other, so that the
table has a check against it, nothing is installed without ``--force`` and
the exit status is 1. ``artune verify TABLE`` re-measures both sides of
every band bound, and an open-ended last band against the fallback at a few
sizes across it, and exits 1 when one no longer holds, or when it could not
tell (a side still unsure after its re-measurements: it says so, and that a
busy machine or a small ``--budget`` is the likely cause).

``--device cuda`` (its GPU status: docs/status.md) measures CUDA tensors (bf16), one
GPU per rank, NCCL and torch symmetric memory, in each ``--mode``: ``graph``
(calls captured in CUDA graphs and replayed, as engines run decode; default
with ``eager``) and ``eager`` (CUDA events around each call). The table's
platform is ``cuda`` with the compute capability as arch, one plan per
(world size, mode); graph-mode logs are ``measurements-ws<N>-graph.jsonl``.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import shlex
import sys
import time
from pathlib import Path
from typing import Any

from artune.cli import arch_option
from artune.errors import ArtuneError


def register(commands: Any) -> None:
    """Add ``tune`` and ``verify`` to the parser."""
    tune = commands.add_parser(
        "tune",
        help="measure this machine, derive its table and report, install the table",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _tune_options(tune)
    _cuda_options(tune)
    tune.set_defaults(run=run_tune)
    verify = commands.add_parser(
        "verify",
        help="re-measure around each band bound of a table, and an open-ended last band against the fallback; "
        "exit 1 when one no longer holds",
    )
    _verify_options(verify)
    verify.set_defaults(run=run_verify)


def _tune_options(tune: argparse.ArgumentParser) -> None:
    tune.add_argument(
        "--world-size",
        type=int,
        action="append",
        default=[],
        metavar="N",
        help="ranks to tune for (repeatable; required unless run under torchrun)",
    )
    tune.add_argument("--out", default=None, metavar="DIR", help="output folder (default ./artune-tune-<fingerprint>)")
    tune.add_argument(
        "--budget",
        type=float,
        default=None,
        metavar="SECONDS",
        help="measurement budget per world size (default 60; 15 with --quick)",
    )
    tune.add_argument("--quick", action="store_true", help="fewer sizes, coarser crossovers, 15 s budget")
    tune.add_argument(
        "--replay",
        default=None,
        metavar="DIR",
        help="measure nothing: derive the table again from the logs and journals of a run in DIR, compare it "
        "with DIR/table.toml and write it, with its report, to --out (default DIR/replay); exit 1 if it differs",
    )
    tune.add_argument("--no-install", action="store_true", help="do not install the table as this machine's")
    tune.add_argument(
        "--force",
        action="store_true",
        help="install the table even when a check of the run puts another plan ahead of it (exit 0)",
    )
    tune.add_argument("--peer-timeout", type=float, default=None, metavar="SECONDS", help=argparse.SUPPRESS)
    tune.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    tune.add_argument(
        "--from-trtllm-csv",
        metavar="CSV",
        help="measure nothing: derive a TensorRT-LLM shape table from its generator's CSV by the evidence rule "
        "(with --arch; printed as TOML, or written to --out/table.toml)",
    )
    tune.add_argument(
        "--arch", type=arch_option, help="with --from-trtllm-csv: the arch the CSV was measured on, e.g. 9.0"
    )


def _cuda_options(tune: argparse.ArgumentParser) -> None:
    tune.add_argument(
        "--device", choices=("cpu", "cuda"), default="cpu", help="measure CPU tensors (default) or CUDA tensors"
    )
    tune.add_argument(
        "--mode",
        choices=("graph", "eager"),
        action="append",
        default=[],
        help="CUDA: the dispatch modes to tune (repeatable; default both); a CPU has eager only",
    )
    tune.add_argument(
        "--calls-per-graph", type=int, default=10, metavar="K", help="graph mode: calls captured per graph (10)"
    )
    tune.add_argument(
        "--flush-l2",
        action="store_true",
        help="graph mode: overwrite L2 before each replay (SGLang's benchmark does, vLLM's does not)",
    )


def _verify_options(verify: argparse.ArgumentParser) -> None:
    verify.add_argument("table", metavar="TABLE", help="a table file, e.g. artune-tune-*/table.toml")
    verify.add_argument(
        "--budget", type=float, default=10.0, metavar="SECONDS", help="budget per world size (default 10)"
    )
    verify.add_argument(
        "--world-size",
        type=int,
        action="append",
        default=[],
        metavar="N",
        help="verify only these plans (default: every plan; under torchrun: WORLD_SIZE's)",
    )
    verify.add_argument("--peer-timeout", type=float, default=None, metavar="SECONDS", help=argparse.SUPPRESS)


def run_replay(args: argparse.Namespace) -> int:
    """``artune tune --replay DIR``: 0 when the replayed table is the run's, 1 when it differs."""
    from artune import machine
    from artune.report import RunInfo, write_report
    from artune.table.check import check_table
    from artune.table.io import dump_table, load_table
    from artune.tune.measured import build_table
    from artune.tune.replay import replay

    where = Path(args.replay)
    logs = sorted(where.glob("measurements-ws*.jsonl"))
    if not where.is_dir() or not logs:
        raise ArtuneError(f"--replay {where}: no measurements-ws<N>.jsonl there; give the --out folder of a run")
    results = []
    for log_path in logs:
        result, left = replay(log_path)
        if left:
            print(f"{log_path.name}: the replay took {left} call(s) fewer than the run", file=sys.stderr)
        results.append(result)
    shipped = where / "table.toml"
    original = load_table(shipped) if shipped.is_file() else None
    table = build_table(results, original.platform if original is not None else machine.cpu_platform())
    out = Path(args.out) if args.out else where / "replay"
    out.mkdir(parents=True, exist_ok=True)
    dump_table(table, out / "table.toml")
    write_report(
        results, table, out, check_table(table), RunInfo(str(out), math.nan, "", f"artune tune --replay {where}")
    )
    differ = 0
    for r in results:
        theirs = original.plan(r.world_size, r.mode, r.plan.hosts) if original is not None else None
        same = theirs is not None and (theirs.bands, theirs.params) == (r.plan.bands, r.plan.params)
        differ += not same
        what = "the same plan as" if same else "a plan that differs from"
        print(f"ws={r.world_size}: replayed {r.calls} calls; {what} {shipped}")
    print(f"replayed table: {out / 'table.toml'}; report: {out / 'report.md'}")
    return 1 if differ else 0


def _budget(value: float | None, what: str) -> float | None:
    if value is not None and not (value > 0 and math.isfinite(value)):
        raise ArtuneError(f"{what} {value}: must be a positive number of seconds")
    return value


def _world_sizes(given: list[int], option: str = "--world-size", least: int = 2) -> list[int]:
    from artune.tune.session import torchrun_world_size, under_torchrun

    if under_torchrun():
        world = torchrun_world_size()
        if any(ws != world for ws in given):
            raise ArtuneError(f"{option} {given} but torchrun started WORLD_SIZE={world}; drop it or match it")
        return [world]
    if not given:
        raise ArtuneError(f"{option} N is required unless run under torchrun (e.g. {option} 2)")
    bad = [ws for ws in given if ws < least]
    if bad:
        raise ArtuneError(f"{option} {bad[0]}: need at least {least} ranks (one rank has nothing to reduce)")
    return sorted(dict.fromkeys(given))


#: the share of CPU time a hypervisor may take during a run that still counts as quiet (bench/tune_robustness.py's)
MAX_STEAL = 0.05


def busy_warning(
    load_before: float, load_after: float, world_size: int, cpus: int | None = None, steal: float = 0.0
) -> str:
    """A warning when the 1-minute load average left fewer free CPUs than ranks, or the hypervisor took more
    than ``MAX_STEAL`` of the CPU time (``steal``, from ``artune.machine.steal_share``), else ``""``.

    The ranks themselves add about ``world_size`` to the load while they run,
    so the load after a run is compared against ``cpus``, the one before
    against ``cpus - world_size``.
    """
    cpus = cpus or os.cpu_count() or 1
    before_busy = load_before > max(1.0, cpus - world_size) + 0.5  # the last run still shows for a minute
    after_busy = load_after > max(cpus, world_size) + 0.5
    stolen = steal > MAX_STEAL  # (NaN, unknown, is not)
    if not (before_busy or after_busy or stolen):
        return ""
    took = f", the hypervisor took {steal:.0%} of the CPU time" if stolen else ""
    return (
        f"the machine was busy (load average {load_before:.1f} before, {load_after:.1f} after, "
        f"{cpus} CPUs, {world_size} ranks{took}): other processes competed with the ranks, so figures may be off"
    )


def _refuse_without_shared_memory(world_sizes: list[int], buffer_bytes: int, consequence: str) -> None:
    """Refuse, before measuring anything, when the shared-memory algorithms could not run: tuning
    would put gloo into every band (and the installed table keep it there after the fix), and verify
    would have nothing to compare."""
    from artune.algorithms.shm.segment import shm_problem
    from artune.communicator.communicator import shm_env_hint

    for world_size in world_sizes:
        problem = shm_problem(world_size, buffer_bytes)
        if problem:
            raise ArtuneError(
                f"shared memory for {world_size} ranks cannot be set up here: {problem}"
                f"{shm_env_hint(world_size, os.environ.get('ARTUNE_SHM_BYTES'))}; {consequence}, so fix it first"
            )


def _from_trtllm_csv(args: argparse.Namespace) -> int:
    """``artune tune --from-trtllm-csv CSV --arch A``: the table the CSV's rounds support, not its argmin."""
    from artune.formats.trtllm.generator import PREFERENCE, read_csv
    from artune.table.io import dump_table, dumps_table
    from artune.tune.shapes import derive_shape_table

    if not args.arch:
        raise ArtuneError("tune --from-trtllm-csv: give --arch, the arch the CSV was measured on (e.g. 9.0)")
    table = derive_shape_table(read_csv(args.from_trtllm_csv), args.arch, PREFERENCE)
    if args.out:
        path = Path(args.out) / "table.toml"
        path.parent.mkdir(parents=True, exist_ok=True)
        dump_table(table, path)
        print(path)
    else:
        print(dumps_table(table), end="")
    return 0


def run_tune(args: argparse.Namespace) -> int:
    """``artune tune``."""
    if args.from_trtllm_csv:
        return _from_trtllm_csv(args)
    from artune import machine, settings
    from artune.report import RunInfo, write_report
    from artune.table.cache import install_table
    from artune.table.check import check_table
    from artune.table.io import dump_table
    from artune.tune.config import CUDA_GRAIN, TuneConfig
    from artune.tune.measured import build_table
    from artune.tune.session import tune_world_sizes

    if args.replay is not None:
        return run_replay(args)
    started = time.monotonic()
    budget = _budget(args.budget, "--budget")
    cuda = args.device == "cuda"
    # one rank on one GPU measures the launch and staging costs only, but runs the whole CUDA pipeline
    world_sizes = _world_sizes(args.world_size, least=1 if cuda else 2)
    config = TuneConfig.quick_run(budget) if args.quick else TuneConfig.full(budget)
    if not cuda:
        _refuse_without_shared_memory(
            world_sizes,
            settings.from_env().shm_bytes,
            "a table measured now would send every size to gloo and keep doing so after the fix",
        )
    platform, fingerprint, timings = machine.cpu_platform(), machine.fingerprint(), _timings(args)
    if cuda:
        platform, fingerprint = _gpu_platform(world_sizes)
        config = config.with_changes(dtype="bfloat16", grain=CUDA_GRAIN)  # what the engines' tables are for
    out = Path(args.out) if args.out else Path(f"artune-tune-{'cuda-' if cuda else ''}{fingerprint}")
    out.mkdir(parents=True, exist_ok=True)
    load_before, times_before = os.getloadavg()[0], machine.cpu_times()
    level = logging.getLogger().getEffectiveLevel()
    results = tune_world_sizes(
        world_sizes, out, config, args.peer_timeout, not args.no_progress, level, args.device, timings
    )
    if results is None:  # a torchrun rank other than 0
        return 0
    table = build_table(results, platform)
    table_path = out / "table.toml"
    dump_table(table, table_path)
    findings = check_table(table)
    refused = [r for r in results if not r.vouched]
    installed = ""
    if not args.no_install and (args.force or not refused):
        installed = str(install_table(table, settings.from_env().cache_dir, fingerprint))
    wall = time.monotonic() - started
    command = "artune " + " ".join(shlex.quote(a) for a in sys.argv[1:]) if sys.argv[1:] else ""
    steal = machine.steal_share(times_before, machine.cpu_times())
    busy = busy_warning(load_before, os.getloadavg()[0], max(world_sizes), steal=steal)
    if busy:
        busy += "; rerun 'artune tune' on an idle machine, or 'artune verify' the table later"
        print(f"artune tune: warning: {busy}", file=sys.stderr)
    write_report(results, table, out, findings, RunInfo(str(out), wall, installed, command, busy))
    _print_summary(results, table_path, out, findings, installed, wall)
    if refused and not args.force:
        where = ", ".join(f"ws={r.world_size}" + ("" if r.mode == "eager" else f" {r.mode}") for r in refused)
        print(
            f"artune tune: not installed: the run's own checks put another plan ahead of the table for {where}; "
            "rerun 'artune tune' on a quieter machine, or add --force to install it anyway",
            file=sys.stderr,
        )
        return 1
    return 0


def _gpu_platform(world_sizes: list[int]) -> tuple[Any, str]:
    """This host's GPU platform and fingerprint; refuses more ranks than GPUs outside torchrun."""
    from artune.gpufacts import gpu_facts

    facts = gpu_facts()
    too_many = [ws for ws in world_sizes if ws > facts.count]
    if too_many and not _under_torchrun():
        raise ArtuneError(
            f"--world-size {too_many[0]} needs one GPU per rank; this host has {facts.count} "
            f"({facts.name}); use torchrun across hosts or a smaller world size"
        )
    return facts.platform(), facts.fingerprint()


def _print_summary(
    results: list[Any], table_path: Path, out: Path, findings: list[Any], installed: str, wall: float
) -> None:
    from artune.report import loss_warning, regret_line, shipping_line
    from artune.report.duel import duel_line
    from artune.report.shipping import near_tie_lines
    from artune.sizes import format_span

    for r in results:
        spans = r.plan.spans() if r.plan.open_ended else r.plan.spans()[:-1]
        bands = [f"{format_span(lower, upto)} {names[0]}" for lower, upto, names in spans]
        params = "; ".join(f"{name} {dict(values)}" for name, values in r.plan.params)
        mode = "" if r.mode == "eager" else f" ({r.mode} mode)"
        print(f"world_size={r.world_size}{mode}: " + ", ".join(bands) + f"; fallback {r.plan.fallback}")
        if params:
            print(f"  parameters: {params}")
        print(f"  {duel_line(r)}")
        if r.states is not None and r.states.seen:
            print(f"  {r.states.describe()}")
        for line in near_tie_lines(r):
            print(f"  near-tie: {line}")
        print(f"  {regret_line(r)}")
        if r.vouched:
            print(f"  {shipping_line(r)}")
        warning = loss_warning(r)
        if warning:
            print(f"artune tune: {warning}", file=sys.stderr)
        print(f"  {r.measured} measured, {r.reused} reused from the log, {r.wall_s:.1f}s in the ranks")
    for f in findings:
        print(f"check: {f}")
    print(f"table: {table_path}" + (f" (installed at {installed})" if installed else " (not installed)"))
    print(f"report: {out / 'report.md'}, {out / 'report.html'}")
    print(f"wall time: {wall:.1f}s")


def _under_torchrun() -> bool:
    from artune.tune.session import under_torchrun

    return under_torchrun()


def _timings(args: argparse.Namespace) -> list[Any]:
    """One ``TimingSpec`` per mode to tune (``[None]``: the CPU's wall clock)."""
    from artune.measure.timers import TimingSpec

    if args.device == "cpu":
        if any(m != "eager" for m in args.mode):
            raise ArtuneError("--mode graph needs --device cuda (CUDA graphs exist on GPUs only)")
        return [None]
    if args.calls_per_graph < 1:
        raise ArtuneError(f"--calls-per-graph {args.calls_per_graph}: must be at least 1")
    wanted = list(dict.fromkeys(args.mode)) or ["graph", "eager"]
    return [
        TimingSpec("graph", args.calls_per_graph, args.flush_l2) if m == "graph" else TimingSpec("events")
        for m in wanted
    ]


def run_verify(args: argparse.Namespace) -> int:
    """``artune verify``: 0 when every bound surely holds, 1 when one drifted or it could not tell."""
    from artune import machine, settings
    from artune.table.io import load_table
    from artune.tune.config import TuneConfig
    from artune.tune.session import VerifyRequest, run_collective, under_torchrun, verify_rank

    budget = _budget(args.budget, "--budget") or 10.0
    table = load_table(args.table)
    plans = [p for p in table.plans if p.mode == "eager"]
    if under_torchrun() or args.world_size:
        wanted = set(_world_sizes(args.world_size))
        missing = sorted(wanted - {p.world_size for p in plans})
        if missing:
            raise ArtuneError(f"{args.table}: no eager plan for world size {missing[0]}; nothing to verify there")
        plans = [p for p in plans if p.world_size in wanted]
    if not plans:
        raise ArtuneError(f"{args.table}: no eager-mode plan to verify")
    _refuse_without_shared_memory(
        [p.world_size for p in plans],
        settings.from_env().shm_bytes,
        "the table's shared-memory bands could not be measured",
    )
    rule = TuneConfig().rule
    drifted = unsure = checked = 0
    load_before, times_before = os.getloadavg()[0], machine.cpu_times()
    for plan in plans:
        request = VerifyRequest(plan, budget, rule, args.peer_timeout, logging.getLogger().getEffectiveLevel())
        checks = run_collective(verify_rank, plan.world_size, request, timeout=180.0 + 6 * budget)
        if checks is None:  # a torchrun rank other than 0
            return 0
        if not checks:
            print(f"ws={plan.world_size}: every size runs the fallback {plan.fallback} here; nothing to verify")
        for check in checks:
            checked += 1
            drifted += not check.holds
            unsure += check.holds and check.unsure
            print(check.describe())
    steal = machine.steal_share(times_before, machine.cpu_times())
    busy = busy_warning(load_before, os.getloadavg()[0], max(p.world_size for p in plans), steal=steal)
    if busy:
        print(f"artune verify: warning: {busy}; verify again on an idle machine", file=sys.stderr)
    print(_verify_summary(checked, drifted, unsure, busy))
    return 1 if drifted or unsure else 0


def _verify_summary(checked: int, drifted: int, unsure: int, busy: str) -> str:
    """The closing line: the table holds only when every check surely does."""
    line = f"{checked} check(s), {drifted} drifted, {unsure} unsure"
    if drifted:
        return line
    if unsure:
        why = "the machine was busy" if busy else "too few rounds told them apart"
        return (
            f"{line}: could not tell whether the table holds ({why}); rerun with a larger --budget on an idle machine"
        )
    return f"{line}: the table holds"
