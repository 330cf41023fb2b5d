"""What measurements and the cost model say of the moved rows: regret against the best, both sides.

Over the sizes a change moves at one ``(arch, world size, mode)``, each
side's choice (``decide`` with what the catalog lets run there, bf16, NVLink
multicast as the hardware has it) is timed against the fastest:

- **modelled**: artune's GPU cost model from the bundled preset for the arch
  (``artune.costmodel.presets``; the calibrated one where there are several,
  ``artune.costmodel.calibrate.FAMILY_PRESET``). Each engine algorithm is
  predicted by the model's algorithm of its scheme (``artune.catalog.Scheme``:
  one-shot, two-shot, multicast, NCCL); the best is the fastest of those. The figures are
  the median and the 90th percentile over the model's replicates of the
  geometric mean over a log grid (8 sizes per octave) of time(choice) /
  time(best).
- **measured**: artune measurement logs (``artune tune``'s
  ``measurements-ws<N>.jsonl``) of that arch and world size: at every logged
  size in the moved ranges, the choice's median time against the fastest
  candidate logged there. Sizes where the choice was not measured are left
  out.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from functools import cache
from typing import Any

from artune import catalog
from artune.errors import ArtuneError
from artune.measure.stats import geomean
from artune.review.types import RegretEvidence
from artune.sizes import MAX_SIZE
from artune.table.decide import decide
from artune.table.types import Table

GRID_PER_OCTAVE = 8
TOP = 256 << 20  # an open-ended moved range is weighed up to 256 MiB (the largest sizes the presets describe)
ALIGN = 16  # every engine algorithm's alignment divides 16: grid sizes are multiples of it


def grid(ranges: Sequence[tuple[int, int | None]]) -> list[int]:
    """Log-spaced sizes (multiples of 16) inside the inclusive ``ranges``; each range gives at least one."""
    out: set[int] = set()
    for lo, hi in ranges:
        top = min(TOP if hi is None else hi, MAX_SIZE)
        first = max(ALIGN, -(-lo // ALIGN) * ALIGN)
        if first > top:
            continue
        inside = {first, top // ALIGN * ALIGN}
        step = 2 ** (1 / GRID_PER_OCTAVE)
        size = float(first)
        while size < top:
            inside.add(int(size) // ALIGN * ALIGN)
            size *= step
        out |= {s for s in inside if first <= s <= top}
    return sorted(out)


@cache
def _preset(arch: str) -> Any:
    """The cost model of ``arch``'s preset (``None`` when no preset is for it, or the model is not installed)."""
    try:
        from artune.costmodel.calibrate import FAMILY_PRESET
        from artune.costmodel.hardware import HardwareModel
        from artune.costmodel.presets import bundled, load_preset
    except ModuleNotFoundError:  # a build without the model stage
        return None
    names = [name for name, data in sorted(bundled()["preset"].items()) if str(data.get("arch")) == arch]
    if not names:
        return None
    name = FAMILY_PRESET.get(arch) if FAMILY_PRESET.get(arch) in names else names[0]
    return HardwareModel(load_preset(name)), name


def _span(ranges: Sequence[tuple[int, int | None]], sizes: Sequence[int]) -> tuple[int, int]:
    """From the first to the last of the moved ranges that hold a size weighed (open ends cut at ``TOP``)."""
    held = [(lo, TOP if hi is None else min(hi, TOP)) for lo, hi in ranges]
    held = [(lo, hi) for lo, hi in held if any(lo <= n <= hi for n in sizes)]
    return min(lo for lo, _ in held), max(hi for _, hi in held)


def _choices(table: Table, sizes: Sequence[int], ws: int, mode: str, multicast: bool) -> list[str]:
    return [decide(table, n, ws, mode, catalog.available(ws, "bfloat16", n, multicast)).algorithm for n in sizes]


def _common(names: Sequence[str]) -> str:
    return Counter(names).most_common(1)[0][0]


def modelled_regret(
    arch: str, before: Table, after: Table, ws: int, mode: str, ranges: Sequence[tuple[int, int | None]]
) -> RegretEvidence | str:
    """Both sides' modelled regret over ``ranges`` at ``(ws, mode)``, or why the model cannot weigh them.

    Sizes where either side's choice has no form in the model (FlashInfer's
    fused all-reduce, say) are left out; ``RegretEvidence.sizes`` counts the rest.
    """
    found = _preset(arch)
    if found is None:
        return f"the cost model has no preset for arch {arch}"
    import numpy as np

    model, preset = found
    grid_sizes = grid(ranges)
    sides = [_choices(t, grid_sizes, ws, mode, model.hw.multicast) for t in (before, after)]
    names = model.candidates(ws, mode)
    of_scheme = {catalog.scheme_of(n): n for n in names}  # the model's algorithm of each scheme

    def form(name: str) -> str:
        return of_scheme.get(catalog.scheme_of(name), "")

    keep = [i for i in range(len(grid_sizes)) if all(form(side[i]) in names for side in sides)]
    if not keep:
        missing = sorted({n for side in sides for n in side if form(n) not in names})
        return f"the cost model has no form for {', '.join(missing)}"
    sizes = [grid_sizes[i] for i in keep]
    samples = {name: np.maximum(model.samples(name, ws, sizes, mode), 1e-9) for name in names}
    best = np.minimum.reduce(list(samples.values()))  # (replicates, sizes)

    def regret(chosen: list[str]) -> np.ndarray:
        times = np.stack([samples[form(chosen[i])][:, k] for k, i in enumerate(keep)], axis=1)
        return np.exp(np.log(times / best).mean(axis=1))

    was, now = regret(sides[0]), regret(sides[1])
    fastest = _common([names[k] for k in np.argmin(np.median(np.stack(list(samples.values())), axis=1), axis=0)])
    # name the fastest form in the engine's words: the first of the sides' algorithms that it describes
    engine = [n for t in (after, before) for p in t.plans for n in p.algorithms]
    words = next((n for n in (*sides[1], *sides[0], *engine) if form(n) == fastest), fastest)
    scheme = catalog.scheme_of(fastest)
    family = fastest if scheme is None or scheme is catalog.Scheme.LIBRARY else scheme.label  # the library: its name
    best = f"{family} ({words})" if words != fastest or family != fastest else fastest
    before_regret, after = float(np.median(was)), float(np.median(now))
    factor = model.interval_factor
    high = after * factor if factor is not None else float(np.percentile(now, 90))
    # where before's rows are within after's calibrated interval the model cannot tell them apart
    inside = after <= before_regret <= high
    # the sweep that settles it times what the sides run, in the engine's words (custom_ar, not 1shot_push)
    theirs = list(dict.fromkeys(n for side in sides for n in side))
    undecided = _undecided(model, arch, ws, mode, sizes, before_regret, after, high, theirs) if inside else ""
    return RegretEvidence(
        arch,
        ws,
        mode,
        "modelled",
        f"preset {preset}",
        *_span(ranges, sizes),
        len(sizes),
        before_regret,
        after,
        high,
        best,
        _validation(model),
        undecided,
    )


def _validation(model: Any) -> str:
    from artune.costmodel.blind import score_line

    return score_line(model.fit.blind)


def _undecided(
    model: Any,
    arch: str,
    ws: int,
    mode: str,
    sizes: Sequence[int],
    was: float,
    now: float,
    high: float,
    algs: Sequence[str],
) -> str:
    """Why the model cannot tell before's rows from after's, and the sweep of ``algs`` (what the sides run,
    in the engine's words) that would."""
    from artune.grid import log_spaced
    from artune.sizes import human_size

    lo = max(min(sizes), 4 << 10)  # below 4 KiB every kernel is at its latency: nothing to settle there
    hi = max(max(sizes), 2 * lo)
    grid_sizes = log_spaced(lo, hi, 2, itemsize=2)
    return (
        f"arch {arch} ws {ws} {mode}: the model cannot tell the sides apart: before's {was:.2f} lies between "
        f"after's {now:.2f} and its calibrated p90 {high:.2f}; to settle it, measure on {model.device} "
        f"{', '.join(algs)} at "
        f"{len(grid_sizes)} sizes {human_size(grid_sizes[0])}..{human_size(grid_sizes[-1])} "
        f"({len(grid_sizes) * len(algs)} measurements)"
    )


def log_times(path: str) -> tuple[str, int, str, dict[int, dict[str, float]]]:
    """``(arch, world size, mode, size -> algorithm -> fastest median us)`` of one measurement log."""
    from artune.measure.records import MeasurementLog

    log = MeasurementLog(path)
    times: dict[int, dict[str, float]] = {}
    for m in log.read():
        if m.ok and math.isfinite(m.time_us):
            at = times.setdefault(m.size_bytes, {})
            at[m.candidate.algorithm] = min(at.get(m.candidate.algorithm, math.inf), m.time_us)
    header = log.header
    return str(header.platform.get("arch", "")), header.world_size, header.gpu.get("mode", "eager"), times


def measured_regret(
    logs: Sequence[str],
    arch: str,
    before: Table,
    after: Table,
    ws: int,
    mode: str,
    ranges: Sequence[tuple[int, int | None]],
) -> list[RegretEvidence]:
    """Both sides' measured regret over the logged sizes in ``ranges``, one row per log of ``(arch, ws, mode)``."""
    out: list[RegretEvidence] = []
    for path in logs:
        try:
            log_arch, log_ws, log_mode, times = log_times(path)
        except (OSError, ArtuneError) as err:
            raise ArtuneError(f"--measured {path}: {err}") from None
        if (log_arch, log_ws, log_mode) != (arch, ws, mode):
            continue
        sizes = [n for n in sorted(times) if any(lo <= n and (hi is None or n <= hi) for lo, hi in ranges)]
        rows: list[tuple[int, float, float, str]] = []
        for n in sizes:
            at = times[n]
            # what could run is what ran: the log's own candidates at this size
            was, now = (decide(t, n, ws, mode, frozenset(at)).algorithm for t in (before, after))
            if was in at and now in at:
                fastest = min(at, key=at.__getitem__)
                rows.append((n, at[was] / at[fastest], at[now] / at[fastest], fastest))
        if rows:
            was_geo, now_geo = (geomean(r[k] for r in rows) for k in (1, 2))
            lo, hi, worst = rows[0][0], rows[-1][0], max(r[2] for r in rows)
            fastest = _common([r[3] for r in rows])
            out.append(
                RegretEvidence(arch, ws, mode, "measured", path, lo, hi, len(rows), was_geo, now_geo, worst, fastest)
            )
    return out
