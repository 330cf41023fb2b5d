"""What measurements and the cost model say of the moved rows: regret against the best, both sides.

Over the sizes a change moves at one ``(arch, world size, mode)``, each
side's choice (``decide`` with what the catalog lets run there, bf16, NVLink
multicast as the hardware has it) is timed against the fastest:

- **modelled**: artune's GPU cost model from the bundled preset for the arch
  (``artune.model.presets``; the calibrated one where there are several,
  ``artune.model.calibrate.FAMILY_PRESET``). Each engine algorithm is
  predicted by its family's form (``artune.model.forms.FORM_OF``: one-shot,
  two-shot, multicast, NCCL); the best is the fastest form. The figures are
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
from artune.review.model import Regret
from artune.sizes import MAX_SIZE
from artune.table.decide import decide
from artune.table.model import Table

GRID_PER_OCTAVE = 8
TOP = 256 << 20  # an open-ended moved range is weighed up to 256 MiB (the largest sizes the presets describe)
ALIGN = 16  # every engine algorithm's alignment divides 16: grid sizes are multiples of it
_MODEL_NAME = {"one_shot": "1shot_push", "two_shot": "2shot_pull", "multicast": "2shot_pull_mc", "ring": "nccl"}


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
        from artune.model.calibrate import FAMILY_PRESET
        from artune.model.gpu import HardwareModel
        from artune.model.presets import bundled, load_preset
    except ModuleNotFoundError:  # a build without the model stage
        return None
    names = [name for name, data in sorted(bundled()["preset"].items()) if str(data.get("arch")) == arch]
    if not names:
        return None
    name = FAMILY_PRESET.get(arch) if FAMILY_PRESET.get(arch) in names else names[0]
    return HardwareModel(load_preset(name)), name


def _choices(table: Table, sizes: Sequence[int], ws: int, mode: str, multicast: bool) -> list[str]:
    return [decide(table, n, ws, mode, catalog.available(ws, "bfloat16", n, multicast)).algorithm for n in sizes]


def _common(names: Sequence[str]) -> str:
    return Counter(names).most_common(1)[0][0]


def modelled_regret(
    arch: str, before: Table, after: Table, ws: int, mode: str, ranges: Sequence[tuple[int, int | None]]
) -> Regret | None:
    """Both sides' modelled regret over ``ranges`` at ``(ws, mode)``; ``None`` without a preset for ``arch``."""
    found = _preset(arch)
    sizes = grid(ranges)
    if found is None or not sizes:
        return None
    import numpy as np

    from artune.model.forms import FORM_OF

    model, preset = found
    names = model.candidates(ws, mode)
    samples = {name: np.maximum(model.samples(name, ws, sizes, mode), 1e-9) for name in names}
    best = np.minimum.reduce(list(samples.values()))  # (replicates, sizes)

    def regret(table: Table) -> tuple[np.ndarray, list[str]] | None:
        chosen = _choices(table, sizes, ws, mode, model.hw.multicast)
        forms = [_MODEL_NAME.get(FORM_OF.get(name, ""), "") for name in chosen]
        if not all(f in samples for f in forms):
            return None  # an algorithm the model has no form for
        times = np.stack([samples[f][:, i] for i, f in enumerate(forms)], axis=1)
        return np.exp(np.log(times / best).mean(axis=1)), chosen

    was, now = regret(before), regret(after)
    if was is None or now is None:
        return None
    fastest = [names[k] for k in np.argmin(np.median(np.stack(list(samples.values())), axis=1), axis=0)]
    by_form = {_MODEL_NAME.get(FORM_OF.get(n, ""), ""): n for n in (*now[1], *was[1])}  # in the engine's words
    return Regret(
        arch,
        ws,
        mode,
        "modelled",
        f"preset {preset}",
        min(lo for lo, _hi in ranges),
        max(TOP if hi is None else min(hi, TOP) for _lo, hi in ranges),
        len(sizes),
        float(np.median(was[0])),
        float(np.median(now[0])),
        float(np.percentile(now[0], 90)),
        by_form.get(_common(fastest), _common(fastest)),
    )


def _log_times(path: str) -> tuple[str, int, str, dict[int, dict[str, float]]]:
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
) -> list[Regret]:
    """Both sides' measured regret over the logged sizes in ``ranges``, one row per log of ``(arch, ws, mode)``."""
    out: list[Regret] = []
    for path in logs:
        try:
            log_arch, log_ws, log_mode, times = _log_times(path)
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
            was_geo, now_geo = (math.exp(sum(math.log(r[k]) for r in rows) / len(rows)) for k in (1, 2))
            lo, hi, worst = rows[0][0], rows[-1][0], max(r[2] for r in rows)
            fastest = _common([r[3] for r in rows])
            out.append(Regret(arch, ws, mode, "measured", path, lo, hi, len(rows), was_geo, now_geo, worst, fastest))
    return out
