"""The cost model: predict the world sizes, sizes and machines nobody measured, and say how sure it is.

- ``forms``: one structural latency form per algorithm family, linear in
  physical parameters (overhead, rounds, per-byte costs, oversubscription,
  cache);
- ``fit``: robust non-negative least squares in relative error;
- ``bootstrap``: the uncertainty of parameters and predictions;
- ``cost``: a fitted model of one machine from ``artune tune``'s logs, and
  where it refuses to predict;
- ``sweeps``: published per-size GPU latency sweeps, as fit and validation
  data;
- ``gpu``: the GPU forms (one-shot, two-shot, multimem, NCCL's protocols) in
  physical parameters per arch family, and the stored fit (``gpu-fit.json``);
- ``presets``: GPU hardware figures from TOML (``presets.toml``), every
  figure with its source;
- ``calibrate``: the joint robust fit on sweeps and SGLang's claimed crossovers,
  per-world-size terms chosen by cross-validation, and the bootstrap;
- ``validate``: the one scoring function (rows as each engine runs them),
  leave one sweep out, and held-out crossovers (Rubin, TensorRT-LLM);
- ``blind``: leave one arch out against copying the nearest arch's rows; the
  claims' weight, the regions the modelled table copies, and the
  split-conformal factor on a plan's regret interval;
- ``hardware``: one GPU's model for ``plan``, crossover intervals, and the
  cheapest sweep that would settle what it is unsure of;
- ``plan``: tables from a model, every plan ``modelled`` with its predicted
  regret band;
- ``report``: what ``artune model fit`` prints and plots.

It may import ``artune.table`` (and ``artune.measure`` to read logs); the
table model never imports it.
"""

from artune.costmodel.cost import VERSION, CostModel, fit_logs
from artune.costmodel.plan import build_plan, build_table

__all__ = ["VERSION", "CostModel", "build_plan", "build_table", "fit_logs"]
