"""Fit the GPU cost model on published sweeps and crossovers, and validate it the way a sceptic would.

    python bench/calibrate_gpu.py [--write] [--out docs/results/cost-model-gpu.md] [--replicates 200] [--quick]
                                  [--sweep FILE@PRESET ...]

Prints Markdown (and writes it to ``--out``), every figure of the cost model's results:

1. the data: every sweep fitted (the ids of costmodel/data/sweeps.toml), and the claimed crossovers;
2. leave one ARCH out (``artune.costmodel.blind``), the way a new GPU arrives: the weight of the hand
   tables' claims chosen by it; per arch and world size the model, the nearest-arch copy under each
   engine's rules and the arch's own hand rows, scored as the engines run them; the hybrid (copied
   rows where the folds say the model loses); the copy rules; the calibrated interval and its coverage;
3. the per-world-size terms the data chose (forward selection, cross-validated by crossover group);
3. the fit: parameters with bootstrap 5-95% intervals, residuals per sweep;
4. leave one sweep out (a second view): for every sweep with a choice, terms chosen and the model fitted without
   it, its plan scored on its own times, next to vLLM's and SGLang's hand tables on the same points
   (``artune.costmodel.validate.score_sweep``), per sweep and in total; where the model loses, the cheapest
   sweep that would settle it (from a bootstrap of that fold);
5. crossovers held out from every fit: SGLang SM107 (Rubin) and TensorRT-LLM, predicted / published,
   under each unseen-arch rule, and the coverage of the 90% intervals; then each SGLang 9.0/10.0 group
   predicted by a fit and bootstrap without it;
6. the presets and their sources; what `artune plan --preset b300 / rubin / mi300x --explain-uncertainty` says.

AMD GPUs (presets mi300x, mi355x) get their own rows: no engine's reference tables are for ROCm, so their
sweeps are scored against RCCL at every size (where they measured it), not against hand tables or copies.

``--write`` stores the fit (parameters and bootstrap replicates) in ``src/artune/costmodel/gpu-fit.json``.
``--quick``: fewer replicates and no per-fold term selection (for a look, not for the README).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # small matrices: BLAS threads only spin on a busy machine

import argparse
import contextlib
import datetime
import io
import math
import platform
import sys
import time
from pathlib import Path

import numpy as np

from artune.costmodel import blind, gpu, hardware, validate
from artune.costmodel import calibrate as cal
from artune.costmodel.plan import build_plan
from artune.costmodel.presets import load_preset, preset_names
from artune.measure.stats import geomean
from artune.sizes import human_size

FIT_FILE = Path(__file__).resolve().parents[1] / "src" / "artune" / "costmodel" / gpu.FIT_FILE
WHO = ("model", "vllm", "sglang")


def _size(n: float) -> str:
    return ">= 1GiB" if n >= cal.HI else human_size(round(n))


def print_data(data: cal.Data) -> None:
    print("## Data\n")
    print("| sweep | source | preset | ws | mode | kernels | sizes | note |\n|---|---|---|---:|---|---|---:|---|")
    for s in data.sweeps:
        print(
            f"| {s.id} | {s.source} | {s.preset} | {s.world_size} | {s.mode} | {', '.join(s.kernels)} | "
            f"{len(s.sizes)} | {s.note} |"
        )
    points = sum(len(s.points()) for s in data.sweeps)
    print(
        f"\n{len(data.sweeps)} sweeps, {points} times; {len(data.crossovers)} crossovers "
        "(SGLang SM90 and SM100, world sizes 2-8 and 16, graph and eager). Never fitted: SGLang SM107 "
        f"(Rubin), TensorRT-LLM ({len(cal.held_out_crossovers())} crossovers).\n"
    )


def print_blind(folds: list[blind.ArchFold], weight: float, totals: dict[float, float], stored: dict) -> None:
    """The leave-one-arch-out table: per arch and world size, and in total; the AMD folds in their own table."""
    amd = [f for f in folds if blind.is_amd(f)]
    folds = [f for f in folds if not blind.is_amd(f)]
    print("## Leave one arch out: the model against copying the nearest arch's rows\n")
    print(
        "Each fold drops every sweep and every claimed crossover of one arch, fits on the rest, plans for it and "
        "scores the plan on the arch's own sweeps (rows as each engine runs them: vLLM's custom all-reduce by its "
        "1-stage / 2-stage rule). Copies: the nearest arch's row under each engine's practice "
        f"(`artune.costmodel.blind.copy_source`). Claims (SGLang's hand crossovers) weigh {weight:g} against one "
        "sweep per group, the weight whose folds score best: "
        + ", ".join(f"weight {w:g}: model {t:.3f}" for w, t in totals.items())
        + ".\n"
    )
    hybrid = blind.hybrid_scores(folds)
    who = ("model", "hybrid", "hybrid, nested", "vllm copy", "sglang copy", "vllm", "sglang")
    head = (
        "| arch | ws | mode | sweeps | sizes | model | hybrid | hybrid, nested | vLLM copy | SGLang copy | "
        "vLLM own | SGLang own |"
    )
    print(head + "\n|---|---:|---|---|---:|" + "---:|" * 7)

    def value(score, w: str) -> float:
        return hybrid[score.sweep.id][w] if w.startswith("hybrid") else score.geomean(w)

    def line(label: str, scores: list) -> str:
        cells = " | ".join(f"{geomean([value(s, w) for s in scores]):.3f}" for w in who)
        return f"{label} | {sum(len(s.rows) for s in scores)} | {cells} |"

    for fold in folds:
        groups: dict[tuple[int, str], list] = {}
        for score in fold.scores:
            groups.setdefault((score.sweep.world_size, score.sweep.mode), []).append(score)
        for (ws, mode), scores in sorted(groups.items()):
            print(line(f"| {fold.arch} | {ws} | {mode} | {', '.join(s.sweep.id for s in scores)}", scores))
        sources = ", ".join(f"{k} from {v}" for k, v in fold.sources.items())
        print(line(f"| **{fold.arch}** (fold: {sources}) | | | ", list(fold.scores)))
    every = [s for f in folds for s in f.scores]
    print(line("| **total** (each sweep once) | | | ", every))
    print(
        "\n(geomean regret = time(choice) / time(fastest measured) over the sizes; a row of several sweeps counts "
        "each once. hybrid: the modelled table, which copies where the rules below say so (rules from every fold); "
        "hybrid, nested: the rules from the other arches' folds only, the honest blind score of the hybrid.)\n"
    )
    rules = blind.rules_from(stored)
    if rules:
        print("Where the folds say the model loses to copying, the modelled table copies (`blind.copy_rules`):\n")
        for r in rules:
            print(f"- {r.why('the nearest arch')}")
        print()
    cal_ = blind.calibrate(folds)
    print(
        f"Calibrated interval: {cal_}. With the factor from the other archs' sweeps only: "
        f"{cal_.arch_covered}/{cal_.units} = {cal_.arch_coverage:.0%}.\n"
    )
    if amd:
        print_blind_amd(amd, stored)


def print_blind_amd(folds: list[blind.ArchFold], stored: dict) -> None:
    """The AMD folds: the model against RCCL at every size, where the sweep measured it."""
    print("### AMD GPUs held out\n")
    print(
        "Each AMD fold drops every sweep of one gfx arch and fits on the rest (NVIDIA's sweeps and the other AMD "
        "arch's), the way a new AMD GPU arrives. No engine's reference tables are for ROCm, so there is no hand row "
        "or copy to score: the comparison is RCCL at every size, the process group every engine falls back to, on "
        "the sweeps that measured it at every size. The model's choice is among every kernel the sweep measured, "
        "QuickReduce's quantized (lossy) levels included; the modelled tables plan full precision only.\n"
    )
    print("| arch | ws | mode | sweep | sizes | model | RCCL at every size |\n|---|---:|---|---|---:|---:|---:|")
    for fold in folds:
        for score in fold.scores:
            s = score.sweep
            rccl = f"{score.geomean('rccl'):.3f}" if "rccl" in score.rows[0].regrets else "-"
            print(
                f"| {fold.arch} | {s.world_size} | {s.mode} | {s.id} | {len(score.rows)} | "
                f"{score.geomean('model'):.3f} | {rccl} |"
            )
    print(f"\nAMD: {blind.score_line(stored, amd=True)}.")
    measured = {validate.preset_arch(s.preset) for s in cal.SWEEPS if validate.kind_of(s.preset) == "rocm"}
    unscored = sorted(measured - {f.arch for f in folds})
    if unscored:
        print(
            f"Not held out: {', '.join(unscored)}, whose published sweeps measured one kernel per size (no choice "
            "to score); its plans carry the folds above."
        )
    print()


def print_fit(central: cal.Result, replicates: np.ndarray, data: cal.Data) -> None:
    lo, hi = np.percentile(replicates, [5, 95], axis=0)
    print(f"## Fit ({len(replicates)} bootstrap refits: sweeps resampled within family, crossovers within group)\n")
    print("| parameter | value | 5%..95% | meaning |\n|---|---:|---:|---|")
    meaning = {**gpu.PARAMS, **{gpu.family_name(k, f): v for f in gpu.FAMILIES for k, v in gpu.FAMILY_PARAMS.items()}}
    for i, name in enumerate(central.names):
        text = meaning[name][2] if name in meaning else gpu.TERMS[name.partition("@")[0]]
        if abs(central.values[i] / cal.prior(name)[0] - 1) < 1e-3 and hi[i] - lo[i] < 0.01 * central.values[i]:
            text += " (at its prior: no data reaches it)"
        print(f"| {name} | {central.values[i]:.4g} | {lo[i]:.3g}..{hi[i]:.3g} | {text} |")
    resid = cal.residuals_of(central, data)
    print("\n| sweep | points | median abs(residual) | worst | offset (us) |\n|---|---:|---:|---:|---:|")
    for s in data.sweeps:
        r = resid[s.id]
        print(
            f"| {s.id} | {len(r)} | {np.median(np.abs(r)):.0%} | {math.exp(r[np.argmax(np.abs(r))]) - 1:+.0%} | "
            f"{central.offsets[s.id]:.1f} |"
        )
    print("\nPer-call overhead per family and mode (median of the sweeps' offsets):", cal.overheads(central, data))
    print()


def loo(data: cal.Data, terms: tuple[str, ...], central: cal.Result, reselect: bool, fold_replicates: int):
    """Leave one sweep out; per fold, the terms (reselected), the scores and a suggestion where the model loses."""
    scores, notes = [], []
    for s in data.sweeps:
        if not s.choice:
            continue
        fold_data = data.without(s.id)
        fold_terms = cal.select_terms(fold_data) if reselect else terms
        fold = cal.fit(fold_data, fold_terms, central)
        score = validate.score_sweep(s, validate.predictor(fold.theta(), s.preset, s.world_size, s.mode))
        scores.append(score)
        suggestion = None
        rivals = [w for w in score.rows[0].regrets if w != "model"]
        if rivals and score.geomean("model") > min(score.geomean(e) for e in rivals) and fold_replicates:
            reps = cal.bootstrap(fold_data, fold_terms, fold, fold_replicates)
            fit = cal.stored_fit(fold_data, fold_terms, fold, reps)
            model = hardware.HardwareModel(load_preset(s.preset), fit, algorithms=s.kernels)
            lo, hi = min(s.sizes) // 2, max(s.sizes) * 2
            suggestion = hardware.uncertain_sizes(model, s.world_size, s.mode, lo, hi)
        notes.append((s, fold_terms, suggestion))
    return scores, notes


def print_loo(scores, notes) -> None:
    amd = [(sc, n) for sc, n in zip(scores, notes, strict=True) if validate.kind_of(sc.sweep.preset) == "rocm"]
    scores, notes = (
        [sc for sc in scores if validate.kind_of(sc.sweep.preset) == "cuda"],
        [n for n in notes if validate.kind_of(n[0].preset) == "cuda"],
    )
    print("## Leave one sweep out: the modelled plan against the hand tables, on the same points\n")
    print(
        "| sweep | GPU | ws | mode | sizes | model | vLLM table | SGLang table | terms chosen without it |\n"
        "|---|---|---:|---|---:|---:|---:|---:|---|"
    )
    for score, (s, fold_terms, _) in zip(scores, notes, strict=True):
        cells = " | ".join(f"{score.geomean(w):.3f} ({score.worst(w):.2f})" for w in WHO)
        print(
            f"| {s.id} | {s.preset} | {s.world_size} | {s.mode} | {len(score.rows)} | {cells} | "
            f"{', '.join(fold_terms) or 'none'} |"
        )
    tot = {w: validate.total(scores, w) for w in WHO}
    cells = " | ".join(f"**{tot[w][0]:.3f}** ({tot[w][1]:.2f})" for w in WHO)
    print(f"| **total** (each sweep once) | | | | {sum(len(s.rows) for s in scores)} | {cells} | |")
    flat = {w: math.exp(np.mean([math.log(r.regrets[w]) for s in scores for r in s.rows])) for w in WHO}
    print(
        "\n(geomean regret over the sweep's sizes, worst size in brackets; regret = time(choice) / time(fastest "
        "measured). Every size counted once instead of every sweep: "
        + ", ".join(f"{w} {flat[w]:.3f}" for w in WHO)
        + ".)\n"
    )
    print("<details><summary>Every size where a choice is not the fastest</summary>\n")
    print("| sweep | size | fastest | model | vLLM | SGLang |\n|---|---:|---|---|---|---|")
    for score in scores:
        for r in score.rows:
            if max(r.regrets.values()) > 1.0:
                cells = " | ".join(f"{r.choices[w]} {r.regrets[w]:.2f}" for w in WHO)
                print(f"| {score.sweep.id} | {human_size(r.nbytes)} | {r.best} | {cells} |")
    print("\n</details>\n")
    lost = [(s, m) for s, _t, m in notes if m is not None]
    if lost:
        print(
            "Where the model loses to a hand table, the cheapest sweep that would settle it (from 30 refits "
            "of that fold):\n"
        )
        for s, m in lost:
            print(f"- {s.id} ({s.preset}): {m}")
        print()
    if amd:
        print("AMD sweeps, each left out once (no hand table for ROCm: RCCL at every size where measured):\n")
        print("| sweep | GPU | ws | mode | sizes | model | RCCL at every size |\n|---|---|---:|---|---:|---:|---:|")
        for score, (s, _terms, _m) in amd:
            has = "rccl" in score.rows[0].regrets
            rccl = f"{score.geomean('rccl'):.3f} ({score.worst('rccl'):.2f})" if has else "-"
            print(
                f"| {s.id} | {s.preset} | {s.world_size} | {s.mode} | {len(score.rows)} | "
                f"{score.geomean('model'):.3f} ({score.worst('model'):.2f}) | {rccl} |"
            )
        print()


def print_crossovers(fit: gpu.GpuFit, central: cal.Result, data: cal.Data) -> None:
    print("## Crossovers (where one-shot ends, and what the publisher switches to): predicted / published\n")
    sets = {
        "fitted: SGLang 9.0/10.0, every boundary": (data.crossovers, "between"),
        "fitted: SGLang 9.0/10.0, one-shot ends": ([c for c in data.crossovers if c.one_shot], "between"),
        "held out: SGLang 10.7 Rubin (rule between)": (cal.sglang_crossovers(("10.7",)), "between"),
        "held out: SGLang 10.7 Rubin (rule nearest)": (cal.sglang_crossovers(("10.7",)), "nearest"),
        "held out: SGLang 10.7 Rubin (rule bandwidth)": (cal.sglang_crossovers(("10.7",)), "bandwidth"),
        "held out: TRT-LLM 9.0/10.0": (cal.TRTLLM, "between"),
        "held out: SGLang 10.7 Rubin, every boundary (rule between)": (
            cal.sglang_crossovers(("10.7",), every=True),
            "between",
        ),
    }
    print(
        "| set | points | geomean ratio | geomean factor off | worst factor | within 2x | 90% coverage | "
        "coverage, parameters only |\n|---|---:|---:|---:|---:|---:|---:|---:|"
    )
    rows_by_set = {}
    for name, (points, rule) in sets.items():
        rows = validate.intervals(fit, points, rule)
        rows_by_set[name] = rows
        m = validate.interval_summary(rows)
        print(
            f"| {name} | {m['points']} | {m['geomean']:.2f} | {m['factor']:.2f} | {m['worst']:.2f} | "
            f"{m['within2']}/{m['points']} | {m['coverage']:.0%} | {m['coverage_params']:.0%} |"
        )
    held = rows_by_set["held out: SGLang 10.7 Rubin (rule between)"] + rows_by_set["held out: TRT-LLM 9.0/10.0"]
    m = validate.interval_summary(held)
    print(
        f"| **all held out** (Rubin rule between, TRT-LLM) | {m['points']} | {m['geomean']:.2f} | "
        f"{m['factor']:.2f} | {m['worst']:.2f} | {m['within2']}/{m['points']} | **{m['coverage']:.0%}** | "
        f"{m['coverage_params']:.0%} |"
    )
    print(
        "\n(factor off = geometric mean of max(ratio, 1/ratio); a lower bound the prediction meets counts as 1.00 and "
        "as covered when the interval reaches it. The interval is a bootstrap prediction interval: each refit's "
        "crossover times a miss drawn from the fitted crossovers' residuals.)\n"
    )
    print("<details><summary>Every crossover</summary>\n")
    print(
        "| set | source | arch | ws | mode | one-shot -> | published | predicted | ratio | 90% interval | covered |\n"
        "|---|---|---|---:|---|---|---:|---:|---:|---|---|"
    )
    for name, rows in rows_by_set.items():
        if "nearest" in name or "bandwidth" in name or "every" in name or "one-shot ends" in name:
            continue
        for r in rows:
            c = r.crossover
            pub = (">= " if c.lower_bound else "") + _size(c.nbytes)
            print(
                f"| {name.split(':')[0]} | {c.source} | {c.arch} | {c.world_size} | {c.mode} | {c.rival} | {pub} | "
                f"{_size(r.predicted)} | {math.exp(r.log_ratio):.2f} | {_size(r.lo)}..{_size(r.hi)} | "
                f"{'yes' if r.covers() else 'no'} |"
            )
    print("\n</details>\n")


def print_group_coverage(data: cal.Data, terms: tuple[str, ...], central: cal.Result, replicates: int) -> None:
    """Each SGLang 9.0/10.0 crossover group predicted by a fit and bootstrap that never saw that group."""
    rows = []
    for group in sorted({c.group for c in data.crossovers}):
        kept = cal.Data(data.sweeps, tuple(c for c in data.crossovers if c.group != group))
        fold = cal.fit(kept, terms, central)
        fit = cal.stored_fit(kept, terms, fold, cal.bootstrap(kept, terms, fold, replicates))
        rows += validate.intervals(fit, [c for c in data.crossovers if c.group == group])
    m = validate.interval_summary(rows)
    worst = sorted(rows, key=lambda r: -abs(r.log_ratio))[:3]
    print(
        f"Held out one arch-and-mode group at a time (SGLang 9.0/10.0, {replicates} refits per fold): {m['points']} "
        f"crossovers, geomean factor off {m['factor']:.2f}, {m['within2']}/{m['points']} within 2x, 90% coverage "
        f"{m['coverage']:.0%} (parameters only {m['coverage_params']:.0%}); the worst: "
        + "; ".join(
            f"{r.crossover.arch} ws {r.crossover.world_size} {r.crossover.mode} {r.crossover.lead} -> "
            f"{r.crossover.rival} published {_size(r.crossover.nbytes)}, predicted {_size(r.predicted)}"
            for r in worst
        )
        + ".\n"
    )


def print_presets() -> None:
    print("## Presets and their sources\n")
    print("| preset | arch | links | SMs | multicast | sources |\n|---|---|---|---:|---|---|")
    for name in preset_names():
        hw = load_preset(name)
        print(
            f"| {name} | {hw.arch} | {hw.fabric} | {hw.sms or '-'} | {'yes' if hw.multicast else 'no'} | "
            f"{'; '.join(hw.sources)} |"
        )
    print()


def print_explain(fit: gpu.GpuFit, preset: str = "rubin", world_sizes=(2, 3, 4, 8)) -> None:
    model = hardware.HardwareModel(load_preset(preset), fit)
    print(f"## artune plan --preset {preset} --explain-uncertainty (world sizes {list(world_sizes)})\n")
    print("```")
    print(f"validated {model.validation}")
    found = []
    for ws in world_sizes:
        for mode in ("graph", "eager"):
            planned = build_plan(model, ws, mode, 4 << 10, 128 << 20, model.params())
            bands = ", ".join(f"<= {human_size(b.upto)} {b.candidates[0]}" for b in planned.plan.bands)
            print(f"ws={ws} {mode}: {bands}; then {planned.plan.fallback}; {planned.regret}")
            for why in planned.copied:
                print(f"  {why}")
            for crossing in hardware.crossings(model, planned.plan):
                print(f"  {crossing}")
            m = hardware.uncertain_sizes(model, ws, mode, 4 << 10, 128 << 20)
            if m:
                found.append(m)
                print(f"  uncertain: {m}")
    best = hardware.cheapest(found)
    print(f"cheapest sweep to run: {best}" if best else "no size where the refits disagree")
    print("```\n")


def extra_sweeps(specs: list[str]) -> tuple:
    """``FILE@PRESET`` benchmark outputs (``artune.evidence.read_evidence``) as fit data (``user1``, ...)."""
    from artune.costmodel.presets import bundled
    from artune.costmodel.published import from_evidence
    from artune.evidence import read_evidence

    presets = bundled()["preset"]
    out = []
    for i, spec in enumerate(specs):
        path, _, preset = spec.rpartition("@")
        if not path or preset not in presets:
            raise SystemExit(f"--sweep {spec}: give FILE@PRESET, PRESET one of {', '.join(sorted(presets))}")
        out.append(from_evidence(read_evidence(path), f"user{i + 1}", preset, note=path))
    return tuple(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"store the fit in {FIT_FILE.name}")
    parser.add_argument("--out", metavar="FILE.md", help="also write the Markdown here")
    parser.add_argument("--replicates", type=int, default=cal.REPLICATES, help="bootstrap refits")
    parser.add_argument("--fold-replicates", type=int, default=30, help="refits per lost fold (suggestions)")
    parser.add_argument("--quick", action="store_true", help="30 refits, no per-fold selection")
    parser.add_argument(
        "--sweep",
        action="append",
        default=[],
        metavar="FILE@PRESET",
        help="also fit a benchmark's output (vLLM, nccl-tests, SGLang, TensorRT-LLM; artune.evidence reads it) "
        "measured on PRESET's GPU (repeatable)",
    )
    args = parser.parse_args()
    if args.out:
        with contextlib.redirect_stdout(io.StringIO()) as page:
            run(args)
        text = page.getvalue()
        command = "python bench/calibrate_gpu.py " + " ".join(sys.argv[1:])
        head = (
            "# The GPU cost model, calibrated and validated on published data\n\n"
            f"Machine: {platform.machine()} CPU, numpy (no GPU: every figure is a fit of published sweeps and "
            f"tables), {datetime.date.today().isoformat()}.\n\n"
            f"Command: `flock /tmp/artune-cpu.lock {command}` (seeded: it reproduces every figure and "
            "`gpu-fit.json`).\n\n"
        )
        Path(args.out).write_text(head + text, encoding="utf-8")
        print(text)
    else:
        run(args)


def run(args: argparse.Namespace) -> None:
    """Every stage, printed in order (see the module docstring)."""
    started = time.monotonic()
    replicates = 30 if args.quick else args.replicates
    claims = cal.default_data()
    if args.sweep:
        claims = cal.Data(claims.sweeps + extra_sweeps(args.sweep), claims.crossovers)
    mark = time.monotonic()
    weight, totals = blind.choose_claim_weight(claims)
    data = cal.Data(claims.sweeps, claims.crossovers, weight)
    print_data(data)
    mark = _stage("claim weight (leave one arch out per weight)", mark)

    log: list[str] = []
    terms = cal.select_terms(data, log=log)
    mark = _stage("term selection", mark)
    print("## Per-world-size terms chosen by the data\n")
    if data.fitted:
        print(f"Candidates: {', '.join(gpu.TERMS)} at world sizes {sorted({c.world_size for c in data.fitted})}.\n")
        for line in log:
            print(f"- {line}")
        print(f"\nKept: {', '.join(terms) or 'none'}.\n")
    else:
        print("None: the terms are chosen by cross-validation over the claims' groups, and the claims weigh 0.\n")

    folds = blind.leave_one_arch_out(data, terms)
    stored = blind.stored_summary(folds, weight, totals)
    mark = _stage("leave one arch out", mark)
    central = cal.fit(data, terms)
    reps = cal.bootstrap(data, terms, central, replicates)
    fit = cal.stored_fit(data, terms, central, reps, blind=stored)
    if args.write:
        FIT_FILE.write_text(fit.to_json(), encoding="utf-8")
    mark = _stage("fit and bootstrap", mark)
    print_blind(folds, weight, totals, stored)
    print_fit(central, reps, data)

    scores, notes = loo(data, terms, central, reselect=not args.quick, fold_replicates=args.fold_replicates)
    mark = _stage("leave one sweep out", mark)
    print_loo(scores, notes)
    print_crossovers(fit, central, data)
    if data.fitted:
        print_group_coverage(data, terms, central, 30 if args.quick else 60)
    mark = _stage("crossovers and group coverage", mark)
    print_presets()
    print_explain(fit, "b300", (6,))
    print_explain(fit)
    print_explain(fit, "mi300x", (2, 4, 8))
    print_explain(fit, "mi355x", (8,))
    print(f"({time.monotonic() - started:.0f} s{', fit written to ' + str(FIT_FILE.name) if args.write else ''})")


def _stage(name: str, since: float) -> float:
    """Say on stderr how long a stage took (the README's figures stay on stdout)."""
    now = time.monotonic()
    print(f"calibrate_gpu: {name} {now - since:.0f} s", file=sys.stderr)
    return now


if __name__ == "__main__":
    main()
