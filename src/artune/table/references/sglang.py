"""SGLang's published all-reduce dispatch as artune tables (``reference:sglang``).

Figures from SGLang's custom all-reduce v2 configs
(``python/sglang/srt/distributed/device_communicators/configs/custom_all_reduce_v2.py``):
per arch and world size, a graph-mode and an eager-mode heuristic plus kernel
block counts. SGLang's rule, first match wins (``KB``/``MB`` are binary):

1. ``2shot_push`` if its range contains ``nbytes``
2. ``1shot_push`` if ``nbytes <= one-shot push threshold``
3. ``1shot_pull`` if ``nbytes <= one-shot pull threshold``
4. ``2shot_pull_mc`` if multicast is on (and its block count is set) and its range contains ``nbytes``
5. ``2shot_pull`` if ``nbytes <= two-shot pull threshold``
6. ``nccl``

Exact bytes, computed as SGLang computes them in Python floats: a float
threshold is truncated (``int(2.438 * MB)`` = 2556428). A range
``Range(lo, hi)`` matches ``hi > 0 and lo <= n <= hi`` and SGLang keeps its
bounds as given, so a float ``lo`` such as ``2.438 * MB`` (2556428.288) first
matches at its ceiling, 2556429; ``Range(0, 0)`` matches nothing.

Arch keys: SGLang's SM90 table is ``"9.0"`` (it serves every 9.x), SM100 is
``"10.0"`` (10.x with minor < 7, reached from "10.3" through artune's family
chain) and SM107 is ``"10.7"``; its default for other archs is the set's
``default`` (world sizes 2..16).

Parameters: every SGLang algorithm needs ``blocks``, its kernel grid size
(``1shot_push`` and ``2shot_push`` share the push grid, ``1shot_pull`` and
``2shot_pull`` the pull grid, ``2shot_pull_mc`` the multicast grid). Where
SGLang sets it to the GPU's SM count, the value is an int when the tuning
device is known (132 for SM90, tuned on H200; 148 for SM100, tuned on B200)
and a string expression of the running device's SM count where it is not:
``"sms"`` or ``"min(192,sms)"`` (SM107 and the default). Where SGLang's
multicast block count is ``None`` it disables multicast; a ``2shot_pull_mc``
candidate is then kept without ``blocks``, so ``decide`` skips it the same
way (and ``artune check`` reports the missing parameter).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from types import MappingProxyType
from typing import NamedTuple

from artune.table.family import TableSet
from artune.table.model import ParamValue, Plan, Platform, Provenance, Table, freeze_params
from artune.table.references.rules import Rule, bands_from_rules, upto

KB = 1024
MB = 1024 * KB

ORIGIN = "reference:sglang"
SOURCE_FILE = "python/sglang/srt/distributed/device_communicators/configs/custom_all_reduce_v2.py"
FALLBACK = "nccl"


class SizeRange(NamedTuple):
    """An SGLang size range: matches ``hi > 0 and lo <= nbytes <= hi``; (0, 0) is disabled."""

    lo: float
    hi: float


OFF = SizeRange(0, 0)


class Heuristic(NamedTuple):
    """One mode's figures for one (arch, world size), in SGLang's units (floats allowed)."""

    push: float  # 1shot_push up to this
    pull: float  # 1shot_pull up to this
    two_shot: float  # 2shot_pull up to this
    mc: SizeRange = OFF  # 2shot_pull_mc range
    two_shot_push: SizeRange = OFF  # 2shot_push range, tried first


class Blocks(NamedTuple):
    """Kernel grid sizes; ``mc`` None disables multicast."""

    push: ParamValue
    pull: ParamValue
    mc: ParamValue | None


H = Heuristic
R = SizeRange

# world size -> (graph, eager)
SM90: dict[int, tuple[Heuristic, Heuristic]] = {
    2: (H(16 * MB, 128 * MB, 128 * MB), H(32 * MB, 128 * MB, 128 * MB)),
    3: (H(1.25 * MB, 1.25 * MB, 128 * MB), H(3 * MB, 3 * MB, 16 * MB)),
    4: (H(384 * KB, 384 * KB, 128 * MB), H(896 * KB, 896 * KB, 32 * MB, R(0, 32 * MB))),
    5: (H(192 * KB, 192 * KB, 32 * MB), H(384 * KB, 384 * KB, 32 * MB, R(0, 32 * MB))),
    6: (H(128 * KB, 128 * KB, 32 * MB, R(8 * MB, 32 * MB)), H(192 * KB, 192 * KB, 32 * MB, R(0, 32 * MB))),
    7: (H(128 * KB, 128 * KB, 32 * MB, R(1 * MB, 32 * MB)), H(128 * KB, 128 * KB, 32 * MB, R(0, 32 * MB))),
    8: (
        H(128 * KB, 128 * KB, 32 * MB, R(512 * KB, 128 * MB)),
        H(128 * KB, 128 * KB, 128 * MB, R(0, 128 * MB)),
    ),
}

_SM100_PUSH_4 = R(int(0.625 * MB), 16 * MB)
SM100: dict[int, tuple[Heuristic, Heuristic]] = {
    2: (H(8 * MB, 32 * MB, 128 * MB), H(16 * MB, 128 * MB, 128 * MB)),
    3: (H(4 * MB, 4 * MB, 128 * MB), H(8 * MB, 8 * MB, 32 * MB)),
    4: (
        H(0.625 * MB, 0.625 * MB, 128 * MB, OFF, _SM100_PUSH_4),
        H(0.625 * MB, 0.625 * MB, 32 * MB, OFF, _SM100_PUSH_4),
    ),
    5: (H(1.5 * MB, 1.5 * MB, 128 * MB), H(2 * MB, 2 * MB, 32 * MB, R(0, 32 * MB))),
    6: (H(1 * MB, 1 * MB, 128 * MB), H(1.25 * MB, 1.25 * MB, 64 * MB, R(0, 64 * MB))),
    7: (H(0.625 * MB, 0.625 * MB, 128 * MB), H(1 * MB, 1 * MB, 64 * MB, R(0, 64 * MB))),
    8: (
        H(0.5 * MB, 0.5 * MB, 128 * MB, R(8 * MB, 128 * MB)),
        H(0.75 * MB, 0.75 * MB, 128 * MB, R(0, 128 * MB)),
    ),
    16: (
        H(0.25 * MB, 0.25 * MB, 128 * MB, R(256 * KB, 128 * MB)),
        H(0.25 * MB, 0.25 * MB, 128 * MB, R(256 * KB, 128 * MB)),
    ),
}


def _same(heuristic: Heuristic) -> tuple[Heuristic, Heuristic]:
    return heuristic, heuristic


SM107: dict[int, tuple[Heuristic, Heuristic]] = {
    2: _same(H(128 * MB, 128 * MB, 128 * MB)),
    3: (H(19.625 * MB, 19.625 * MB, 128 * MB), H(39.188 * MB, 39.188 * MB, 128 * MB)),
    4: (H(6.938 * MB, 6.938 * MB, 128 * MB), H(9.812 * MB, 9.812 * MB, 128 * MB, R(9.812 * MB, 128 * MB))),
    5: _same(H(6.938 * MB, 6.938 * MB, 128 * MB, R(6.938 * MB, 128 * MB))),
    6: _same(H(4.875 * MB, 4.875 * MB, 128 * MB, R(4.875 * MB, 128 * MB))),
    7: _same(H(3.438 * MB, 3.438 * MB, 128 * MB, R(3.438 * MB, 128 * MB))),
    8: _same(H(2.438 * MB, 2.438 * MB, 128 * MB, R(2.438 * MB, 128 * MB))),
    16: _same(H(832 * KB, 832 * KB, 128 * MB, R(832 * KB, 128 * MB))),
}

DEFAULT: dict[int, tuple[Heuristic, Heuristic]] = {ws: _same(H(1 * MB, 1 * MB, 16 * MB)) for ws in range(2, 17)}


def _sm90_blocks(world_size: int) -> Blocks:
    return Blocks(push=132, pull=64, mc=None if world_size < 4 else 128 // world_size)


_SM100_MC = {5: 64, 6: 48, 7: 48, 8: 32, 16: 32}


def _sm100_blocks(world_size: int) -> Blocks:
    return Blocks(push=148, pull=148 if world_size == 2 else 96, mc=_SM100_MC.get(world_size))


_SM107_MC = {4: 128, 5: 128, 6: 128, 7: 128, 8: 96, 16: 32}


def _sm107_blocks(world_size: int) -> Blocks:
    return Blocks(push="sms", pull="min(192,sms)", mc=_SM107_MC.get(world_size))


def _default_blocks(world_size: int) -> Blocks:
    return Blocks(push="sms", pull="sms", mc=None)


# ------------------------------------------------------------------ conversion


def _threshold(value: float) -> int:
    # SGLang passes float thresholds through int(): truncation
    return int(value)


def _range_rule(algorithm: str, size_range: SizeRange) -> Rule | None:
    if size_range.hi <= 0:
        return None  # contains() is false for every size
    # the float bounds are compared as they are: the first whole byte >= lo, the last <= hi
    return Rule(algorithm, math.ceil(size_range.lo), math.floor(size_range.hi))


def rules(heuristic: Heuristic) -> list[Rule]:
    """SGLang's first-match rules for one heuristic, in its priority order."""
    ordered = [
        _range_rule("2shot_push", heuristic.two_shot_push),
        upto("1shot_push", _threshold(heuristic.push)),
        upto("1shot_pull", _threshold(heuristic.pull)),
        _range_rule("2shot_pull_mc", heuristic.mc),
        upto("2shot_pull", _threshold(heuristic.two_shot)),
    ]
    return [rule for rule in ordered if rule is not None]


def _params(algorithms: tuple[str, ...], blocks: Blocks) -> dict[str, dict[str, ParamValue]]:
    grid: dict[str, ParamValue | None] = {
        "2shot_push": blocks.push,
        "1shot_push": blocks.push,
        "1shot_pull": blocks.pull,
        "2shot_pull": blocks.pull,
        "2shot_pull_mc": blocks.mc,
    }
    return {name: {"blocks": grid[name]} for name in algorithms if grid.get(name) is not None}


def _table(
    arch: str,
    figures: dict[int, tuple[Heuristic, Heuristic]],
    blocks_for: Callable[[int], Blocks],
    provenance: Provenance,
) -> Table:
    plans = []
    for world_size, heuristics in sorted(figures.items()):
        for mode, heuristic in zip(("graph", "eager"), heuristics, strict=True):
            bands = bands_from_rules(rules(heuristic), FALLBACK)
            used = tuple(dict.fromkeys(name for band in bands for name in band.candidates))
            params = _params(used, blocks_for(world_size))
            plans.append(Plan(world_size, mode, bands, FALLBACK, freeze_params(params)))
    return Table(Platform("cuda", arch), provenance, tuple(plans), origin=ORIGIN)


def _provenance(device: str, notes: str) -> Provenance:
    return Provenance(source="published", device=device, tool="sglang", notes=f"{notes} ({SOURCE_FILE})")


def table_set() -> TableSet:
    """SGLang's SM90, SM100 and SM107 tables keyed by arch, with its default as the set's default."""
    tables = {
        "9.0": _table(
            "9.0",
            SM90,
            _sm90_blocks,
            _provenance(
                "H200",
                "SGLang custom all-reduce v2, SM90 table (every 9.x); tuned on H200; "
                "blocks: push = 132 SMs, pull 64, multicast 128 // world size from 4 ranks",
            ),
        ),
        "10.0": _table(
            "10.0",
            SM100,
            _sm100_blocks,
            _provenance(
                "B200 (world size 16 on GB200)",
                "SGLang custom all-reduce v2, SM100 table (10.x with minor < 7); tuned on B200; "
                "blocks: push = 148 SMs, pull = 148 at 2 ranks else 96",
            ),
        ),
        "10.7": _table(
            "10.7",
            SM107,
            _sm107_blocks,
            _provenance(
                "Rubin (one variant)",
                "SGLang custom all-reduce v2, SM107 table (10.x with minor >= 7); tuned on one Rubin "
                "variant only; SM-count blocks left as 'sms' / 'min(192,sms)'",
            ),
        ),
    }
    default = _table(
        "default",
        DEFAULT,
        _default_blocks,
        _provenance(
            "",
            "SGLang custom all-reduce v2 default for archs without a tuned table: world sizes 2..16, "
            "one-shot up to 1 MB, two-shot up to 16 MB, no multicast, blocks = SMs",
        ),
    )
    return TableSet("sglang", "cuda", MappingProxyType(tables), default)
