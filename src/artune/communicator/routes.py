"""The Communicator's route cache: how each call signature runs once it has been decided.

A signature is ``(shape, dtype, device, op, route key)``; the route key is
the forced algorithm (or ``None``), or for a call that names its parameters
the one object the cache keeps for that algorithm and those parameters (the
compiled router matches keys by identity, so equal parameters must give the
same object). On first sight the Communicator decides the signature and binds
two routes: the eager one (or the Communicator's mode) and the graph one for
later CUDA graph captures; repeats look them up here.

The counters say how calls found their route: ``hits`` (found here),
``misses`` (decided and bound: first sight, or a call whose parameters cannot
be hashed and so is decided each time) and ``cleared`` (times the cache was
full and started afresh). ``Communicator.route_stats`` adds the calls the
compiled router ran without reaching Python (``fast``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

import torch

#: distinct signatures (and parameter keys) remembered; the cache starts afresh when full
MAX_ROUTES = 4096

Signature = tuple[torch.Size, torch.dtype, torch.device, object, object]


class Route(NamedTuple):
    """How the calls of one signature run.

    ``run`` is the algorithm bound to their shape, dtype, op and parameters;
    ``agree`` the round that compares the call across ranks before any data
    moves (``None``: the algorithm compares calls itself, or the route is for
    a capture, where nothing may talk to peers); ``algorithm`` its name;
    ``agree_step`` the same round as a compiled header-only step, which the
    compiled router runs on repeats (``None``: it calls ``agree``).
    """

    run: Callable[[torch.Tensor], object]
    agree: Callable[[], None] | None
    algorithm: str
    agree_step: object = None


@dataclass(frozen=True)
class RouteStats:
    """How a Communicator's calls found their route (see ``artune.communicator.routes``)."""

    fast: int  # ran by the compiled router, without reaching Python
    hits: int  # found in the route cache by the general path
    misses: int  # decided and bound
    routes: int  # signatures remembered now
    cleared: int  # times the full cache started afresh

    def __str__(self) -> str:
        return (
            f"{self.fast} fast, {self.hits} hits, {self.misses} misses; "
            f"{self.routes} signatures remembered, cleared {self.cleared} times"
        )


class RouteCache:
    """Per signature its eager and graph ``Route``, the parameter keys, and the hit and miss counters.

    The Communicator reads ``eager`` and ``graph`` directly and adds to
    ``hits`` itself: on its general path a method call per call would cost
    more than the lookup.
    """

    __slots__ = ("cleared", "eager", "graph", "hits", "keys", "limit", "misses")

    def __init__(self, limit: int = MAX_ROUTES) -> None:
        self.eager: dict[Signature, Route] = {}
        self.graph: dict[Signature, Route] = {}
        #: one object per (algorithm, explicit parameters) seen: the route key of such calls
        self.keys: dict[tuple[str | None, tuple], tuple[str | None, tuple]] = {}
        self.hits = 0
        self.misses = 0
        self.cleared = 0
        self.limit = limit

    def __len__(self) -> int:
        return len(self.eager)

    def key(self, algorithm: str | None, params: Mapping[str, object]) -> object:
        """The route key of calls naming ``algorithm`` and ``params``: the same object for the same items in
        the same order (another order is a second key, as good); ``False`` when a value is unhashable."""
        frozen = (algorithm, tuple(params.items()))
        try:
            found = self.keys.get(frozen)
            if found is None:
                if len(self.keys) >= self.limit:
                    self._start_afresh()
                found = self.keys[frozen] = frozen
        except TypeError:  # an unhashable value: such calls are decided afresh each time
            return False
        return found

    def add(self, key: Signature, eager: Route, graph: Route) -> None:
        """Remember a signature's routes, decided on its first sight (a miss)."""
        self.misses += 1
        if len(self.eager) >= self.limit:
            self._start_afresh()
        self.eager[key] = eager
        self.graph[key] = graph

    def _start_afresh(self) -> None:
        self.cleared += 1
        self.clear()

    def clear(self) -> None:
        """Forget every route and parameter key (the compiled router keeps its few, each still valid)."""
        self.eager.clear()
        self.graph.clear()
        self.keys.clear()

    def stats(self, fast: int) -> RouteStats:
        """The counters, with ``fast`` calls the compiled router ran."""
        return RouteStats(fast, self.hits, self.misses, len(self.eager), self.cleared)
