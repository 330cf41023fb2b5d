"""The cost model: predict the world sizes, sizes and machines nobody measured, and say how sure it is.

- ``forms``: one structural latency form per algorithm family, linear in
  physical parameters (overhead, rounds, per-byte costs, oversubscription,
  cache);
- ``fit``: robust non-negative least squares in relative error;
- ``bootstrap``: the uncertainty of parameters and predictions;
- ``cost``: a fitted model of one machine from ``artune tune``'s logs, and
  where it refuses to predict;
- ``gpu`` and ``presets``: the GPU model from hardware figures
  (``presets.toml``, every figure with its source);
- ``calibrate``: the GPU factors fitted on published crossovers, and the
  report of predicted against published on the data held out;
- ``plan``: tables from a model, every plan ``modelled`` with its predicted
  regret band;
- ``report``: what ``artune model fit`` prints and plots.

It may import ``artune.table`` (and ``artune.measure`` to read logs); the
table model never imports it.
"""

from artune.model.cost import VERSION, CostModel, ModelRefusal, fit_logs
from artune.model.plan import build_plan, build_table

__all__ = ["VERSION", "CostModel", "ModelRefusal", "build_plan", "build_table", "fit_logs"]
