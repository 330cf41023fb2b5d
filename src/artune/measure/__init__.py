"""Measuring all-reduce candidates: timing, statistics, records and the resumable log.

``measure`` (collective, inside every rank) checks and times candidates over a
``Reducer`` (an ``artune.Communicator``, or named functions in a
``FunctionReducer``) and returns ``Measurement`` s identical on every rank;
``MeasurementLog`` keeps them in an append-only JSON-lines file under a
self-describing ``Header``. torch is imported only when the harness is used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from artune.measure.records import (
    Candidate,
    Header,
    Measurement,
    MeasurementLog,
    bus_bandwidth,
    measurement_key,
)
from artune.measure.stats import Summary, summarize

if TYPE_CHECKING:
    from artune.measure.harness import candidates_for, measure, memcpy_bandwidth
    from artune.measure.reducers import FunctionReducer, Reducer, process_group_all_reduce

__all__ = [
    "Candidate",
    "FunctionReducer",
    "Header",
    "Measurement",
    "MeasurementLog",
    "Reducer",
    "Summary",
    "bus_bandwidth",
    "candidates_for",
    "measure",
    "measurement_key",
    "memcpy_bandwidth",
    "process_group_all_reduce",
    "summarize",
]

_LAZY = {
    "candidates_for": "artune.measure.harness",
    "measure": "artune.measure.harness",
    "memcpy_bandwidth": "artune.measure.harness",
    "FunctionReducer": "artune.measure.reducers",
    "Reducer": "artune.measure.reducers",
    "process_group_all_reduce": "artune.measure.reducers",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'artune.measure' has no attribute {name!r}")
    return getattr(__import__(module, fromlist=[name]), name)
