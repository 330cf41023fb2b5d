"""Structural latency forms: one per scheme (``artune.catalog.Scheme``), linear in physical parameters.

A form turns ``(world_size p, bytes per rank n)`` into features whose weighted
sum is the predicted time of one all-reduce in microseconds. Every parameter
is a physical cost, so that a fit on some world sizes carries to others:

- ``overhead_us``: per call (launch, bookkeeping);
- ``round_us``: per synchronisation round (one barrier or flag exchange);
- ``oversub_round_us``: extra per round for each rank beyond the cores
  (a waiting rank must be scheduled back in; zero when ranks <= cores);
- ``copy_us_per_MB``: local copy, per MB (1e6 bytes) of the message;
- ``peer_us_per_MB``: moving one MB to or from a peer and reducing it
  (move and reduce scale alike within one form, so they share a parameter);
- ``spill_us_per_MB``: extra per MB of the ranks' working set beyond the
  cache (``Context.cache_bytes``): the cache-size effect.

Byte terms are scaled by ``max(1, p / cores)``: with more ranks than cores,
each rank gets a share of a core. The forms (``FORMS``, by scheme; an
algorithm's scheme is the catalog's):

- ``one_shot``: every rank reads the other p-1 inputs and reduces them, one
  round per chunk;
- ``two_shot``: reduce-scatter then all-gather, 2 (p-1)/p n bytes, two rounds
  per chunk;
- ``multicast``: NVLink SHARP, the switch reduces; n bytes through the link,
  one round;
- ``library``: the collective library's all-reduce as a ring (gloo's, NCCL's):
  2 (p-1) steps of latency, 2 (p-1)/p n bytes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from artune.catalog import Scheme, scheme_of

MB = 1e6

PARAMETERS: dict[str, str] = {
    "overhead_us": "per call",
    "round_us": "per synchronisation round",
    "oversub_round_us": "per round and rank beyond the cores",
    "copy_us_per_MB": "local copy per MB",
    "peer_us_per_MB": "peer move and reduce per MB",
    "spill_us_per_MB": "per MB of working set beyond the cache",
}


@dataclass(frozen=True)
class Context:
    """What a form needs to know about the machine: cores, cache and chunk size (``None``: no effect)."""

    cores: int | None = None
    cache_bytes: int | None = None
    chunk_bytes: int | None = None

    def describe(self) -> str:
        """One line for reports and provenance."""
        parts = [f"cores={self.cores}" if self.cores else "cores=unlimited"]
        if self.cache_bytes:
            parts.append(f"cache={self.cache_bytes >> 20}MiB")
        if self.chunk_bytes:
            parts.append(f"chunk={self.chunk_bytes >> 10}KiB")
        return " ".join(parts)


Features = Callable[[np.ndarray, np.ndarray, Context], dict[str, np.ndarray]]


@dataclass(frozen=True)
class Form:
    """One structural form: a name, a summary and its features."""

    name: str
    summary: str
    params: tuple[str, ...]
    _features: Features

    def matrix(self, p: np.ndarray, n: np.ndarray, ctx: Context) -> np.ndarray:
        """The design matrix, one row per ``(p, n)``, one column per parameter (in ``params`` order)."""
        p = np.asarray(p, dtype=float)
        n = np.asarray(n, dtype=float)
        cols = self._features(p, n, ctx)
        return np.column_stack([np.broadcast_to(cols[name], n.shape).astype(float) for name in self.params])

    def predict(self, theta: np.ndarray, p: np.ndarray, n: np.ndarray, ctx: Context) -> np.ndarray:
        """Predicted microseconds for parameter vector(s) ``theta`` (shape ``(k,)`` or ``(b, k)``)."""
        return np.asarray(theta) @ self.matrix(p, n, ctx).T


def _share(p: np.ndarray, ctx: Context) -> np.ndarray:
    """How many ranks share a core (1 when there are enough cores)."""
    return np.maximum(1.0, p / ctx.cores) if ctx.cores else np.ones_like(p)


def _over(p: np.ndarray, ctx: Context) -> np.ndarray:
    return np.maximum(0.0, p - ctx.cores) if ctx.cores else np.zeros_like(p)


def _steps(n: np.ndarray, ctx: Context) -> np.ndarray:
    if not ctx.chunk_bytes:
        return np.ones_like(n)
    return np.maximum(1.0, np.ceil(n / ctx.chunk_bytes))


def _spill(p: np.ndarray, n: np.ndarray, ctx: Context) -> np.ndarray:
    """MB of the ranks' working set (p messages) beyond the cache."""
    if not ctx.cache_bytes:
        return np.zeros_like(n)
    return np.maximum(0.0, p * n - ctx.cache_bytes) / MB


def _common(p: np.ndarray, n: np.ndarray, ctx: Context, rounds: np.ndarray, peer: np.ndarray, copy: np.ndarray):
    s = _share(p, ctx)
    return {
        "overhead_us": np.ones_like(n),
        "round_us": rounds,
        "oversub_round_us": rounds * _over(p, ctx),
        "copy_us_per_MB": copy * s / MB,
        "peer_us_per_MB": peer * s / MB,
        "spill_us_per_MB": _spill(p, n, ctx) * s,
    }


def _one_shot(p: np.ndarray, n: np.ndarray, ctx: Context) -> dict[str, np.ndarray]:
    return _common(p, n, ctx, _steps(n, ctx), (p - 1) * n, n)


def _two_shot(p: np.ndarray, n: np.ndarray, ctx: Context) -> dict[str, np.ndarray]:
    return _common(p, n, ctx, 2 * _steps(n, ctx), 2 * (p - 1) / p * n, n)


def _multicast(p: np.ndarray, n: np.ndarray, ctx: Context) -> dict[str, np.ndarray]:
    return _common(p, n, ctx, np.ones_like(n), n, np.zeros_like(n))


def _ring(p: np.ndarray, n: np.ndarray, ctx: Context) -> dict[str, np.ndarray]:
    return _common(p, n, ctx, 2 * (p - 1) * np.ones_like(n), 2 * (p - 1) / p * n, np.zeros_like(n))


_CPU = ("overhead_us", "round_us", "oversub_round_us", "copy_us_per_MB", "peer_us_per_MB", "spill_us_per_MB")
_LINK = ("overhead_us", "round_us", "peer_us_per_MB")

FORMS: dict[str, Form] = {
    f.name: f
    for f in (
        Form(Scheme.ONE_SHOT.value, "(p-1) n peer bytes, one round per chunk", _CPU, _one_shot),
        Form(Scheme.TWO_SHOT.value, "2 (p-1)/p n peer bytes, two rounds per chunk", _CPU, _two_shot),
        Form(Scheme.MULTICAST.value, "n bytes through the switch, one round", _LINK, _multicast),
        Form(Scheme.LIBRARY.value, "a ring: 2 (p-1) steps, 2 (p-1)/p n bytes", _CPU, _ring),
    )
}


def form_for(algorithm: str) -> Form | None:
    """The form of ``algorithm``'s scheme in the catalog, or ``None`` when it has none."""
    scheme = scheme_of(algorithm)
    return FORMS[scheme.value] if scheme is not None else None
