"""``artune model fit`` and ``artune plan``: fit the cost model, and tables from it."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from artune.errors import ArtuneError
from artune.sizes import format_bound, format_size, parse_size
from artune.table.types import MODES

EXTRAPOLATE = 4  # how far beyond the measured sizes a fitted model may predict


def register(commands: Any) -> None:
    """Add ``model`` and ``plan`` to the parser."""
    model = commands.add_parser("model", help="the cost model: fit it to measurements")
    sub = model.add_subparsers(dest="model_command", required=True, metavar="SUBCOMMAND")
    fit = sub.add_parser("fit", help="fit the latency forms to measurement logs; parameters, residuals, a plot")
    fit.add_argument("logs", nargs="+", metavar="LOG", help="measurements-ws<N>.jsonl from 'artune tune'")
    fit.add_argument("--out", metavar="DIR", help="write fit.md and fit.png here")
    fit.add_argument("--cores", type=int, help="the measured machine's cores (default: this machine's)")
    fit.set_defaults(run=run_fit)

    plan = commands.add_parser("plan", help="a table from the cost model: world sizes and machines not measured")
    source = plan.add_mutually_exclusive_group(required=True)
    source.add_argument("--from", dest="logs", action="append", metavar="LOG", help="fit these logs (repeatable)")
    source.add_argument("--preset", help="a GPU preset: " + ", ".join(_preset_names()))
    source.add_argument("--hardware", metavar="FILE.toml", help="a GPU described by its hardware figures")
    plan.add_argument(
        "--world-size",
        action="append",
        required=True,
        metavar="N|A..B",
        help="world sizes to plan (repeatable; 2..16 is a range)",
    )
    plan.add_argument("--mode", action="append", choices=MODES, help="modes (GPU default: graph and eager)")
    plan.add_argument("--sizes", default=None, metavar="LO..HI", help="size range (default: measured, or 4KiB..128MiB)")
    plan.add_argument("--cores", type=int, help="the measured machine's cores (with --from; default: this machine's)")
    plan.add_argument("--out", metavar="FILE", help="write the table here (default: print it)")
    plan.add_argument(
        "--explain-uncertainty",
        action="store_true",
        help="GPU: each crossover's 90%% interval, and the cheapest sweep that would settle the uncertain sizes",
    )
    plan.add_argument(
        "--quick-reduce",
        choices=("int8", "int6", "int4", "int3"),
        metavar="LEVEL",
        help="AMD GPU: also plan QuickReduce quantized to LEVEL (int8, int6, int4, int3): lossy, as the engines' "
        "VLLM_ROCM_QUICK_REDUCE_QUANTIZATION is; the default plans full precision only",
    )
    plan.add_argument(
        "--unseen-rule",
        choices=("between", "nearest", "bandwidth"),
        default="between",
        help="GPU of no fitted arch family (Rubin): how its round latency extrapolates (default: between)",
    )
    plan.set_defaults(run=run_plan)


def _preset_names() -> list[str]:
    try:
        from artune.costmodel.presets import preset_names

        return preset_names()
    except ArtuneError:  # pragma: no cover - a broken bundled file is caught by tests
        return []


def parse_world_sizes(values: list[str]) -> list[int]:
    """``["2..4", "8"]`` -> ``[2, 3, 4, 8]``; ``ArtuneError`` for anything else."""
    out: set[int] = set()
    for value in values:
        lo_text, sep, hi_text = value.partition("..")
        try:
            lo, hi = int(lo_text), int(hi_text) if sep else int(lo_text)
        except ValueError:
            raise ArtuneError(f"--world-size {value!r}: expected N or A..B, e.g. 2..16") from None
        if lo < 1 or hi < lo or hi > 4096:
            raise ArtuneError(f"--world-size {value!r}: expected 1 <= A <= B <= 4096")
        out.update(range(lo, hi + 1))
    return sorted(out)


def _size_range(text: str | None, default: tuple[int, int]) -> tuple[int, int]:
    if text is None:
        return default
    lo_text, sep, hi_text = text.partition("..")
    if not sep:
        raise ArtuneError(f"--sizes {text!r}: expected LO..HI, e.g. 4KiB..64MiB")
    lo, hi = parse_size(lo_text, "--sizes"), parse_size(hi_text, "--sizes")
    if not 0 < lo < hi:
        raise ArtuneError(f"--sizes {text!r}: need 0 < LO < HI")
    return lo, hi


# ------------------------------------------------------------------ model fit


def run_fit(args: argparse.Namespace) -> int:
    """Fit and print parameters, residuals and findings; write fit.md and fit.png with --out."""
    from artune.costmodel.cost import fit_logs
    from artune.costmodel.report import fit_markdown, plot_fit

    model = fit_logs(args.logs, cores=args.cores)
    text = fit_markdown(model)
    print(text)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "fit.md").write_text(text + "\n", encoding="utf-8")
        plot_fit(model, out / "fit.png")
        print(f"wrote {out / 'fit.md'} and {out / 'fit.png'}", file=sys.stderr)
    return 0


# ------------------------------------------------------------------ plan


def run_plan(args: argparse.Namespace) -> int:
    """Build a modelled table; print it or write it to --out."""
    from artune.costmodel.plan import modelled_table
    from artune.table.io import dump_table, dumps_table

    if args.explain_uncertainty and args.logs:
        raise ArtuneError("plan: --explain-uncertainty is for GPU plans (--preset or --hardware)")
    world_sizes = parse_world_sizes(args.world_size)
    params: dict[str, dict[str, Any]] = {}
    if args.logs:
        from artune.costmodel.cost import fit_logs

        model: Any = fit_logs(args.logs, cores=args.cores)
        modes = args.mode or ["eager"]
        if model.kind == "cpu" and modes != ["eager"]:
            raise ArtuneError("plan: CPU tables have only mode eager")
        lo, hi = _size_range(args.sizes, model.size_range)
        low, high = model.size_range
        if lo < low / EXTRAPOLATE or hi > high * EXTRAPOLATE:
            raise ArtuneError(
                f"plan: --sizes {args.sizes} reaches more than {EXTRAPOLATE}x beyond the measured sizes "
                f"{format_size(low)}..{format_size(high)}; the model does not extrapolate that far: measure them"
            )
    else:
        from artune.costmodel.gpu import ROCM_CANDIDATES
        from artune.costmodel.hardware import HardwareModel
        from artune.costmodel.presets import load_hardware, load_preset

        hardware = load_preset(args.preset) if args.preset else load_hardware(args.hardware)
        model = HardwareModel(hardware, unseen_rule=args.unseen_rule)
        if args.quick_reduce:
            if model.kind != "rocm":
                raise ArtuneError(f"plan: --quick-reduce is QuickReduce on AMD GPUs; {hardware.arch} is not one")
            lossy = f"quick_ar_{args.quick_reduce}"
            algorithms = (*ROCM_CANDIDATES[:-1], lossy, ROCM_CANDIDATES[-1])
            model = HardwareModel(hardware, unseen_rule=args.unseen_rule, algorithms=algorithms)
        params = model.params()
        modes = args.mode or list(MODES)
        lo, hi = _size_range(args.sizes, (4 << 10, 128 << 20))
    table, plans, refused = modelled_table(model, world_sizes, modes, lo, hi, params)
    for why in refused:
        print(f"artune plan: refused: {why}", file=sys.stderr)
    for p in plans:
        bands = ", ".join(f"<= {format_bound(b.upto)} {b.candidates[0]}" for b in p.plan.bands)
        route = f"{bands}; then {p.plan.fallback}" if bands else f"{p.plan.fallback} at every size"
        print(f"ws={p.plan.world_size} {p.plan.mode}: {route}; {p.regret}", file=sys.stderr)
        for why in p.copied:
            print(f"  {why}", file=sys.stderr)
    if not args.logs:
        print(f"artune plan: validated {model.validation}", file=sys.stderr)
    if args.explain_uncertainty:
        explain_uncertainty(model, plans, lo, hi)
    if args.out:
        dump_table(table, args.out)
        print(f"artune plan: wrote {args.out} (modelled, not measured)", file=sys.stderr)
    else:
        print(dumps_table(table))
    return 0


def explain_uncertainty(model: Any, plans: list[Any], lo: int, hi: int) -> None:
    """Per plan: crossovers with their 90% intervals and the uncertain sizes; then the cheapest sweep to run."""
    from artune.costmodel.hardware import cheapest, crossings, uncertain_sizes

    found = []
    print(f"artune plan: uncertainty ({model.fit.source})", file=sys.stderr)
    for p in plans:
        print(f"ws={p.plan.world_size} {p.plan.mode}: {p.regret}", file=sys.stderr)
        for why in p.copied:
            print(f"  {why}", file=sys.stderr)
        for crossing in crossings(model, p.plan):
            print(f"  crossover {crossing}", file=sys.stderr)
        m = uncertain_sizes(model, p.plan.world_size, p.plan.mode, lo, hi)
        if m is not None:
            found.append(m)
            print(f"  uncertain: {m}", file=sys.stderr)
    best = cheapest(found)
    if best is None:
        print("cheapest sweep to run: none; the refits agree on the fastest algorithm at every size", file=sys.stderr)
    else:
        print(f"cheapest sweep to run on {model.device}: {best}", file=sys.stderr)
