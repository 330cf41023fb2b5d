"""Deriving a dispatch table from measurements: ``artune tune`` and ``artune verify``.

The pipeline per world size (``tune_world``): a coarse sweep of every
algorithm, the coarse sizes whose pick is unsure measured again, a search of
each winning algorithm's declared tunables, bisection of every crossover, the
plan held to the evidence at each band's own sizes, the duel against every
fixed rule, the held-out regret, and the run's own verdict on what ships.
The rules that make it safe (only correct candidates, never a flip for a
difference the evidence cannot tell from a tie, no band without evidence,
never a table its own checks say loses) are in ``artune.tune.derive``,
``artune.tune.compare``, ``artune.tune.bands`` and ``artune.tune.verdict``;
the budget split is in ``artune.tune.config``.

Modules: ``compare`` (the rule for "faster": a paired interval and a tie
band), ``measurer`` (where measurements come from, the resumable cache),
``derive`` (winners, bisection, bands), ``bands`` (bands from evidence),
``search`` (tunables), ``duel``, ``regret``, ``verdict`` (what ships),
``tuner`` (orchestration), ``build`` (the table), ``verify``, ``session``
(ranks, torchrun), ``replay``, ``synthetic`` (a modelled bench with a
machine's noise, for tests and dry runs).
"""

from artune.tune.build import build_table
from artune.tune.compare import Comparison, FasterRule, Pooled
from artune.tune.config import TuneConfig
from artune.tune.derive import BandCrossover, Pick
from artune.tune.measurer import CachedMeasurer, Measurer
from artune.tune.regret import RegretScore
from artune.tune.search import ParamSearch
from artune.tune.tuner import WorldResult, tune_world
from artune.tune.verify import BandCheck, BoundCheck, verify_plan

__all__ = [
    "BandCheck",
    "BandCrossover",
    "BoundCheck",
    "CachedMeasurer",
    "Comparison",
    "FasterRule",
    "Measurer",
    "ParamSearch",
    "Pick",
    "Pooled",
    "RegretScore",
    "TuneConfig",
    "WorldResult",
    "build_table",
    "tune_world",
    "verify_plan",
]
