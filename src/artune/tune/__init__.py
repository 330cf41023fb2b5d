"""Deriving a dispatch table from measurements: ``artune tune`` and ``artune verify``.

**How a tune decides.** Every choice rests on candidates timed in turns within
one harness call, and ``a`` is faster than ``b`` at a size only when the 99%
interval of their typical call's ratio clears the 3% per-size tie (the
defaults) and their time spent does not contradict it; anything closer is a
tie or unsure, measured again while the budget lasts and then left to the
incumbent. The winners of the coarse sweep, the tunables' search and the
bisection of every crossover make a plan whose every band must be held up by
the evidence at its own sizes. The duel times the plan's choices against every
fixed rule at fresh sizes and repairs the plan where a rule's choice is
confirmed faster. The plan is then weighed against every fixed rule over the
duel's sizes and over held-out sizes no phase touched, by the geometric mean
of the time their choices spent with the typical call's veto, and a plan is
ahead only beyond the 1% plan tie over its whole interval. The derived table
ships unless a check puts a fixed rule ahead of it, and a plan that some check
puts another ahead of is never installed without ``--force``.

The pipeline per world size is ``tune_world``; the rules that make it safe
are in ``artune.tune.compare`` (both comparisons and both ties, stated
once), ``artune.tune.derive``, ``artune.tune.bands`` and
``artune.tune.shipping``; the budget split is in ``artune.tune.config``.

Modules: ``compare`` (one candidate against another at a size, one plan
against another over sizes), ``config`` (the settings and the budget split),
``measurer`` (where measurements come from, the resumable cache), ``state``
(what the phases share), ``derive`` (winners, bisection), ``bands`` (bands
from evidence), ``search`` (tunables), ``duel`` (the plan against every
fixed rule at fresh sizes, and its repair), ``regret`` (the held-out
sizes' score), ``shipping`` (what ships), ``machine_states`` (where calls
at different moments disagreed), ``tuner`` (orchestration), ``measured``
(the table from the results), ``shapes`` (a shape table from
measurements), ``verify`` (``artune verify``: does a table still hold),
``session`` (ranks, torchrun), ``progress`` (the progress bar), ``replay``
(a run derived again from its log and journal), ``synthetic`` (a modelled
bench with a machine's noise, for tests and dry runs).
"""

from artune.tune.compare import Comparison, FasterRule, Pooled
from artune.tune.config import TuneConfig
from artune.tune.derive import BandCrossover, Pick
from artune.tune.measured import build_table
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
