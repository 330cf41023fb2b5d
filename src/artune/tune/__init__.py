"""Deriving a dispatch table from measurements: ``artune tune`` and ``artune verify``.

The pipeline per world size (``tune_world``): a coarse sweep of every
algorithm, the coarse sizes whose pick is unsure measured again, a search of
each winning algorithm's declared tunables, bisection of every crossover, the
plan, and the regret on off-grid sizes against the fixed published rule and
every fixed single-algorithm rule. The rules that make it safe (only correct
candidates, never a flip for a difference the evidence cannot tell from a
tie) are in ``artune.tune.derive`` and ``artune.tune.compare``; the budget
split is in ``artune.tune.config``.

Modules: ``evidence`` (the rule for "faster": a paired interval and a tie
band), ``grid`` (which sizes), ``bench`` (where measurements come from, the
resumable cache), ``derive`` (winners, bisection, bands), ``search``
(tunables), ``regret``, ``tuner`` (orchestration), ``build`` (the table),
``verify``, ``session`` (ranks, torchrun), ``synthetic`` (a modelled bench
with a machine's noise, for tests and dry runs).
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
