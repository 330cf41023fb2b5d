"""Robust, non-negative least squares of a form on measurements, in relative error.

Latencies span four decades, so the fit minimises *relative* residuals
``model / measured - 1``. Outliers (a descheduled rank, a page fault) are
down-weighted with Huber weights by iteratively reweighted least squares,
and every parameter is kept non-negative (a physical cost cannot be
negative): a parameter that would go negative is pinned at zero and the
rest refitted. Columns with no signal in the data (no oversubscribed world
size, no size beyond the cache) are pinned at zero and reported as not
identified. numpy only: the problems are a handful of parameters.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from artune.costmodel.forms import Context, Form

HUBER_DELTA = 0.10  # relative residuals beyond 10% count linearly, not squared
IRLS_ROUNDS = 30
BAD_FIT = 0.25  # median |relative residual| above this: the form does not fit
SHAPE_BIAS = 0.15  # a size range whose median residual is beyond +-15% shows a shape the form lacks


@dataclass(frozen=True)
class Points:
    """Measured times: world sizes ``p``, bytes per rank ``n``, microseconds ``t`` (arrays of one length)."""

    p: np.ndarray
    n: np.ndarray
    t: np.ndarray

    def __len__(self) -> int:
        return len(self.t)

    def take(self, index: np.ndarray) -> Points:
        """The points at ``index`` (for resampling)."""
        return Points(self.p[index], self.n[index], self.t[index])


def _nnls(a: np.ndarray, b: np.ndarray, free: np.ndarray) -> np.ndarray:
    """Least squares with the parameters outside ``free`` pinned at zero and none negative."""
    free = free.copy()
    theta = np.zeros(a.shape[1])
    while free.any():
        cols = np.flatnonzero(free)
        scale = np.linalg.norm(a[:, cols], axis=0)
        scale[scale == 0] = 1.0
        sol, *_ = np.linalg.lstsq(a[:, cols] / scale, b, rcond=None)
        sol = sol / scale
        if (sol >= 0).all():
            theta[cols] = sol
            break
        free[cols[np.argmin(sol)]] = False  # the most negative: pin at zero, refit the rest
    return theta


def identified(form: Form, points: Points, ctx: Context) -> np.ndarray:
    """Which of the form's parameters the data can determine (a column that is not all zero)."""
    x = form.matrix(points.p, points.n, ctx)
    return np.abs(x).sum(axis=0) > 0


def solve(form: Form, points: Points, ctx: Context, free: np.ndarray | None = None) -> np.ndarray:
    """The robust non-negative fit: the parameter vector in ``form.params`` order."""
    x = form.matrix(points.p, points.n, ctx)
    a = x / points.t[:, None]
    b = np.ones(len(points))
    free = np.abs(x).sum(axis=0) > 0 if free is None else free
    w = np.ones(len(points))
    theta = np.zeros(x.shape[1])
    for _ in range(IRLS_ROUNDS):
        sw = np.sqrt(w)
        new = _nnls(a * sw[:, None], b * sw, free)
        r = np.abs(a @ new - 1.0)
        w = np.where(r <= HUBER_DELTA, 1.0, HUBER_DELTA / np.maximum(r, 1e-12))
        if np.allclose(new, theta, rtol=1e-6, atol=1e-12):
            break
        theta = new
    return new


def relative_residuals(form: Form, theta: np.ndarray, points: Points, ctx: Context) -> np.ndarray:
    """``predicted / measured - 1`` per point."""
    return form.predict(theta, points.p, points.n, ctx) / points.t - 1.0


def robust_loss(residuals: np.ndarray) -> float:
    """The Huber loss of relative residuals (what the fit minimises)."""
    r = np.abs(residuals)
    return float(np.where(r <= HUBER_DELTA, 0.5 * r**2, HUBER_DELTA * (r - 0.5 * HUBER_DELTA)).sum())


def shape_findings(points: Points, residuals: np.ndarray) -> list[str]:
    """What the residuals say the form lacks: a bad fit overall, or a size range with a consistent bias.

    The sizes are split into (up to) four ranges of equal count; a range
    whose median residual is beyond ``SHAPE_BIAS`` is a shape the form does
    not have (the model over- or under-predicts there).
    """
    out: list[str] = []
    med = float(np.median(np.abs(residuals))) if len(residuals) else math.nan
    if med > BAD_FIT:
        out.append(f"does not fit: median |residual| {med:.0%} (> {BAD_FIT:.0%})")
    order = np.argsort(points.n, kind="stable")
    groups = np.array_split(order, min(4, max(1, len(order) // 3)))
    for group in groups:
        if len(group) < 3:
            continue
        bias = float(np.median(residuals[group]))
        if abs(bias) > SHAPE_BIAS:
            lo, hi = int(points.n[group].min()), int(points.n[group].max())
            from artune.sizes import format_size

            word = "over" if bias > 0 else "under"
            out.append(
                f"residual shape: {word}-predicts {format_size(lo)}-{format_size(hi)} by {abs(bias):.0%} (median)"
            )
    return out
