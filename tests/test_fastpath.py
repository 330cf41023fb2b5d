"""The Communicator's compiled fast path: a repeated call runs from C, and only the call it was routed for.

Each case runs on real ranks, with the compiled round and (``p``) with it
switched off, where ``Gate`` stands in and every call takes the general path.
A peer dying during a fast call is in test_communicator.py
(``test_survivor_sees_mismatch_timeout_and_closed``: its calls are routed).
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import torch

from artune.algorithms.shm import native
from artune.communicator.routes import Route, RouteCache
from artune.launch import RankContext, run_ranks

PATHS = ["n", "p"] if native._module is not None else ["p"]


class _Spy:
    """Wraps a router and counts the calls it ran itself."""

    def __init__(self, router: Any) -> None:
        self.router = router
        self.ran = 0

    def __call__(self, tensor: torch.Tensor, op: object, algorithm: str | None) -> bool:
        done = self.router(tensor, op, algorithm)
        self.ran += bool(done)
        return done

    def __getattr__(self, name: str) -> Any:
        return getattr(self.router, name)


def _expected(world: int, numel: int, dtype: torch.dtype, op: str) -> torch.Tensor:
    values = [torch.arange(numel).to(dtype) + r for r in range(world)]
    out = values[0].clone()
    for v in values[1:]:
        out = out + v if op == "sum" else torch.maximum(out, v)
    return out


def _signatures(ctx: RankContext, path: str) -> dict[str, Any]:
    """Calls that share an element count but differ in dtype, op, algorithm, layout or device."""
    import artune

    os.environ["ARTUNE_SHM_NATIVE"] = "1" if path == "n" else "0"
    wrong: list[str] = []
    with artune.Communicator(timeout=20) as comm:
        spy = comm._fast = _Spy(comm._fast)
        calls = [
            (torch.float32, "sum", None),
            (torch.int32, "sum", None),
            (torch.float32, "max", None),
            (torch.bfloat16, "sum", "shm_two_shot"),
            (torch.float32, "sum", "shm_two_shot"),
            (torch.float32, "sum", "gloo"),
        ]
        for repeat in range(3):
            for dtype, op, algorithm in calls:
                t = torch.arange(1024).to(dtype) + ctx.rank
                comm.all_reduce(t, op, algorithm=algorithm)
                if not torch.equal(t, _expected(ctx.world_size, 1024, dtype, op)):
                    wrong.append(f"{dtype} {op} {algorithm} repeat {repeat}")
        # the same count as a strided view, and in a bigger tensor: the general path copies or routes them
        base = torch.arange(2048, dtype=torch.float32) + ctx.rank
        view = base[::2]
        comm.all_reduce(view)
        if not torch.equal(view, _expected(ctx.world_size, 2048, torch.float32, "sum")[::2]):
            wrong.append("strided view")
        if not torch.equal(base[1::2], torch.arange(2048, dtype=torch.float32)[1::2] + ctx.rank):
            wrong.append("the view's gaps were written")
        grad = (torch.arange(1024, dtype=torch.float32) + ctx.rank).requires_grad_()
        comm.all_reduce(grad)
        if not torch.equal(grad.detach(), _expected(ctx.world_size, 1024, torch.float32, "sum")):
            wrong.append("a tensor that requires grad")
        try:
            comm.all_reduce(torch.ones(1024, device="meta"))
            wrong.append("a meta tensor was reduced")
        except artune.ArtuneError:
            pass
        ran, stats = spy.ran, comm.route_stats
    try:
        comm.all_reduce(torch.ones(1024))
        closed = "no error"
    except artune.CommunicatorClosed as err:
        closed = str(err)
    return {"wrong": wrong, "ran": ran, "closed": closed, "stats": stats}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("path", PATHS)
def test_repeated_calls_run_from_c_and_only_for_their_own_signature(path: str) -> None:
    for rank, res in enumerate(run_ranks(_signatures, 2, path, timeout=100)):
        assert res["wrong"] == [], rank
        assert "closed" in res["closed"], rank
        if path == "n":
            # six signatures (gloo's too, after its compiled agreement round), twice each after their first
            # sight, and the tensor that requires grad (the first's signature, a step: C takes it); the
            # strided view takes the general path
            assert res["ran"] == 13, rank
        else:
            assert res["ran"] == 0, rank
        # the router counts what it ran itself; six signatures were decided (the meta tensor's raised), and
        # each of the 20 calls that ran found its route one way: 3 x 6 calls, the strided view, the grad tensor
        stats = res["stats"]
        assert (stats.fast, stats.misses, stats.routes, stats.cleared) == (res["ran"], 6, 6, 0), stats
        assert stats.fast + stats.hits + stats.misses == 20, stats


def _explicit_params(ctx: RankContext, path: str) -> dict[str, Any]:
    """A call that names its parameters (as the tuner's variants do) is routed once, like any other."""
    import artune

    os.environ["ARTUNE_SHM_NATIVE"] = "1" if path == "n" else "0"
    wrong = []
    numel = 16 << 10  # 64 KiB of float32: 16 chunks of 4 KiB, or one of 1 MiB
    with artune.Communicator(timeout=20) as comm:
        spy = comm._fast = _Spy(comm._fast)
        for repeat in range(3):
            for chunk in (4096, 1 << 20):
                t = torch.arange(numel, dtype=torch.float32) + ctx.rank
                comm.all_reduce(t, algorithm="shm_two_shot", params={"chunk_bytes": chunk})
                if not torch.equal(t, _expected(ctx.world_size, numel, torch.float32, "sum")):
                    wrong.append(f"chunk {chunk}, repeat {repeat}")
        routes = {key[4]: route.run for key, route in comm._routes.eager.items()}
        distinct = len(set(map(id, routes.values())))
        return {"wrong": wrong, "ran": spy.ran, "routes": len(routes), "distinct": distinct, "stats": comm.route_stats}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("path", PATHS)
def test_calls_with_explicit_parameters_are_routed_once(path: str) -> None:
    for rank, res in enumerate(run_ranks(_explicit_params, 2, path, timeout=100)):
        assert res["wrong"] == [], rank
        assert res["routes"] == 2 == res["distinct"], rank  # one bound route per parameter set
        assert res["ran"] == (2 * 2 if path == "n" else 0), rank  # both, after their first sight, from C
        stats = res["stats"]
        assert (stats.fast, stats.hits, stats.misses) == (res["ran"], 4 - res["ran"], 2), stats


def _many_signatures(ctx: RankContext, path: str) -> dict[str, Any]:
    import artune

    os.environ["ARTUNE_SHM_NATIVE"] = "1" if path == "n" else "0"
    wrong = []
    with artune.Communicator(timeout=20) as comm:
        spy = comm._fast = _Spy(comm._fast)
        for repeat in range(3):
            for k in range(1, 21):  # 20 signatures: more than the router holds
                t = torch.arange(8 * k, dtype=torch.float32) + ctx.rank
                comm.all_reduce(t)
                if not torch.equal(t, _expected(ctx.world_size, 8 * k, torch.float32, "sum")):
                    wrong.append(f"{8 * k} elements, repeat {repeat}")
        return {"wrong": wrong, "ran": spy.ran, "stats": comm.route_stats}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("path", PATHS)
def test_more_signatures_than_the_router_holds(path: str) -> None:
    for rank, res in enumerate(run_ranks(_many_signatures, 2, path, timeout=100)):
        assert res["wrong"] == [], rank
        # the last 16 first seen stay in C; the 4 they replaced take the general path, still correct
        assert res["ran"] == (2 * 16 if path == "n" else 0), rank
        stats = res["stats"]  # the Python cache holds all 20: the 4 the router dropped are its hits
        assert (stats.fast, stats.hits, stats.misses, stats.routes) == (res["ran"], 40 - res["ran"], 20, 20), stats


def _overlapping(ctx: RankContext, out_dir: str, path: str, warm: bool) -> str:
    import artune

    os.environ["ARTUNE_SHM_NATIVE"] = "1" if path == "n" else "0"
    go = Path(out_dir, "go")
    with artune.Communicator(timeout=20) as comm:
        if warm:
            comm.all_reduce(torch.ones(8))  # the first thread's call below then takes the fast path
        if ctx.rank == 1:
            while not go.exists():  # rank 1 holds back, so rank 0's call waits inside
                time.sleep(0.01)
            comm.all_reduce(torch.ones(8))
            return "ok"
        first = threading.Thread(target=comm.all_reduce, args=(torch.ones(8),))
        first.start()
        while not comm._fast.busy:
            time.sleep(0.001)
        outcomes = []
        for t in (torch.ones(8), torch.ones(16)):  # a routed signature and a new one
            try:
                comm.all_reduce(t)
                outcomes.append("no error")
            except artune.ArtuneError as err:
                outcomes.append(str(err))
        try:
            comm.close()
            outcomes.append("closed under a running call")
        except artune.ArtuneError as err:
            outcomes.append(str(err))
        go.touch()
        first.join(20)
        return " | ".join(outcomes)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("warm", [False, True], ids=["first-sight", "routed"])
@pytest.mark.parametrize("path", PATHS)
def test_overlapping_calls_and_a_close_from_threads_are_refused(tmp_path: Path, path: str, warm: bool) -> None:
    outcome = run_ranks(_overlapping, 2, str(tmp_path), path, warm, timeout=100)[0]
    assert outcome.count("another thread is inside an all_reduce") == 3, outcome
    assert "close(): another thread" in outcome


def test_the_route_cache_starts_afresh_when_full_and_counts_it() -> None:
    cache = RouteCache(limit=2)
    route = Route(lambda t: None, None, "gloo")
    signatures = [(torch.Size([n]), torch.float32, torch.device("cpu"), "sum", None) for n in (1, 2, 3)]
    for signature in signatures:
        cache.add(signature, route, route)
    assert (len(cache), cache.misses, cache.cleared) == (1, 3, 1)  # the third found it full
    assert signatures[2] in cache.eager and signatures[2] in cache.graph
    first = cache.key("shm_two_shot", {"chunk_bytes": 4096})
    assert cache.key("shm_two_shot", {"chunk_bytes": 4096}) is first  # the router matches keys by identity
    assert cache.key("shm_two_shot", {"chunk_bytes": [4096]}) is False  # unhashable: no key
    cache.key("shm_two_shot", {"chunk_bytes": 1})
    cache.key("shm_two_shot", {"chunk_bytes": 2})  # a third key: full again, routes and keys go together
    assert (len(cache), len(cache.keys), cache.cleared) == (0, 1, 2)
    stats = cache.stats(fast=5)
    assert (stats.fast, stats.hits, stats.misses) == (5, 0, 3)
    assert str(stats) == "5 fast, 0 hits, 3 misses; 0 signatures remembered, cleared 2 times"


class _Unhashable(int):
    """A valid chunk size that cannot be part of a route key."""

    __hash__ = None  # type: ignore[assignment]


def _logged_routes(ctx: RankContext) -> dict[str, Any]:
    import logging

    import artune

    records: list[str] = []
    handler = logging.Handler(logging.DEBUG)
    handler.emit = lambda record: records.append(record.getMessage())  # type: ignore[method-assign]
    logger = logging.getLogger("artune.communicator.communicator")
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    with artune.Communicator(timeout=20) as comm:
        for _ in range(2):
            comm.all_reduce(torch.ones(64), algorithm="shm_two_shot", params={"chunk_bytes": _Unhashable(4096)})
            comm.all_reduce(torch.ones(64))
        stats = comm.route_stats
    return {"records": [r for r in records if r.startswith("artune ")], "stats": stats}


@pytest.mark.timeout(120)
def test_first_sights_and_the_counters_are_in_the_debug_log() -> None:
    for rank, res in enumerate(run_ranks(_logged_routes, 2, timeout=100)):
        routes = [r for r in res["records"] if r.startswith("artune route: 64 x torch.float32 on cpu, op sum")]
        assert len(routes) == 1, (rank, res["records"])  # once, on first sight; the unhashable call has no route
        # the unhashable call came first: a miss of its own, then this one's
        assert "key None -> " in routes[0] and "(routes: 0 fast, 0 hits, 2 misses;" in routes[0], routes[0]
        stats = res["stats"]
        assert stats.misses == 3 and stats.fast + stats.hits == 1, (rank, stats)  # 2 unhashable + 1 first sight
        closed = [r for r in res["records"] if r.startswith("artune Communicator closed; routes: ")]
        assert closed == [f"artune Communicator closed; routes: {stats}"], res["records"]


def _mismatch_on_repeats(ctx: RankContext, path: str) -> dict[str, Any]:
    """Ranks that repeat different routed signatures: the agreement (gloo's compiled header round, the shm
    step's own header) still raises CallMismatch on every rank, and the ranks stay in step."""
    import artune

    os.environ["ARTUNE_SHM_NATIVE"] = "1" if path == "n" else "0"
    out: dict[str, Any] = {"mismatch": []}
    with artune.Communicator(timeout=20) as comm:
        calls = [(1024, "gloo"), (2048, "gloo"), (1024, "shm_one_shot")]
        for numel, algorithm in calls:  # first sight, on both ranks alike
            comm.all_reduce(torch.ones(numel), algorithm=algorithm)
        pairs = [(0, 1), (0, 2), (2, 1)]  # rank 0's call and rank 1's: gloo/gloo, gloo/shm, shm/gloo
        for mine in pairs:
            numel, algorithm = calls[mine[ctx.rank]]
            try:
                comm.all_reduce(torch.ones(numel), algorithm=algorithm)
                out["mismatch"].append("no error")
            except artune.CallMismatch as err:
                out["mismatch"].append(str(err))
        t = torch.arange(1024, dtype=torch.float32) + ctx.rank
        comm.all_reduce(t, algorithm="gloo")  # still usable, ranks still in step
        out["after"] = torch.equal(t, _expected(ctx.world_size, 1024, torch.float32, "sum"))
        out["stats"] = comm.route_stats
    return out


@pytest.mark.timeout(120)
@pytest.mark.parametrize("path", PATHS)
def test_a_mismatch_on_repeated_signatures_raises_on_every_rank(path: str) -> None:
    for rank, res in enumerate(run_ranks(_mismatch_on_repeats, 2, path, timeout=100)):
        assert len(res["mismatch"]) == 3, rank
        for message in res["mismatch"]:
            assert "ranks called all-reduce differently" in message and "rank 1: numel=" in message, message
        assert "numel=1024" in res["mismatch"][0] and "numel=2048" in res["mismatch"][0]
        assert "algorithm=gloo" in res["mismatch"][1] and "algorithm=shm_one_shot" in res["mismatch"][1]
        assert res["after"], rank
        stats = res["stats"]
        # the mismatched calls raised, so only the last call counts as run: from C where it is built
        assert (stats.fast, stats.misses) == ((1, 3) if path == "n" else (0, 3)), stats


class _FakeCuda:
    """Just what the router reads of a CUDA tensor, so its CUDA logic runs on a CPU-only host."""

    def __init__(self, device: int = 0, contiguous: bool = True, grad: bool = False) -> None:
        self.dtype, self.is_cpu, self.is_cuda, self.requires_grad = torch.float32, False, True, grad
        self._device, self._contiguous = device, contiguous

    def numel(self) -> int:
        return 8

    def get_device(self) -> int:
        return self._device

    def is_contiguous(self) -> bool:
        return self._contiguous


@pytest.mark.skipif(native._module is None, reason="the compiled router is not built here")
def test_the_router_runs_cuda_routes_by_device_and_capture_state() -> None:
    capture = {"on": False, "asked": 0}

    def capturing() -> bool:
        capture["asked"] += 1
        return capture["on"]

    ran: list[str] = []

    def part(name: str) -> Any:
        return lambda *tensor: ran.append(name)

    router = native._module.Router(capturing)
    assert router.add(torch.float32, "sum", None, 8, 0, part("agree"), part("run"), part("graph"))
    x = _FakeCuda()
    assert router(x, "sum", None) and ran == ["agree", "run"]  # eager: agreed, then run
    capture["on"] = True
    ran.clear()
    assert router(x, "sum", None) and ran == ["graph"]  # in a capture: the graph route, nothing talks to peers
    assert capture["asked"] == 2  # once per call
    ran.clear()
    for other in (_FakeCuda(device=1), _FakeCuda(contiguous=False), _FakeCuda(grad=True)):
        assert router(other, "sum", None) is False  # another GPU's, a copy's, autograd's: the general path
    assert router(x, "max", None) is False and router(x, "sum", "nccl") is False and ran == []
    # a CPU route is never asked about captures
    cpu = torch.ones(8)
    assert router.add(torch.float32, "sum", None, 8, -1, None, part("cpu"), None)
    asked = capture["asked"]
    assert router(cpu, "sum", None) and ran == ["cpu"] and capture["asked"] == asked
    assert router.hits == 3
    # a failing agreement raises, runs nothing, and leaves the router idle
    capture["on"] = False
    ran.clear()

    def refuse() -> None:
        raise RuntimeError("peers disagree")

    router.add(torch.float32, "sum", None, 8, 0, refuse, part("run"), part("graph"))
    with pytest.raises(RuntimeError, match="peers disagree"):
        router(x, "sum", None)
    assert ran == [] and not router.busy and router.hits == 3
    # a capture test that clears the router mid-call: the call runs the route it matched, held meanwhile
    clearing = native._module.Router(lambda: router2.clear())
    router2 = clearing
    assert clearing.add(torch.float32, "sum", None, 8, 0, None, part("held"), None)
    assert clearing(x, "sum", None) and ran == ["held"] and not clearing.busy
    assert clearing(x, "sum", None) is False  # cleared
    with pytest.raises(ValueError, match="no graph route"):
        router.add(torch.float32, "sum", None, 8, -1, None, part("run"), part("graph"))
    with pytest.raises(TypeError, match="run must be a Step of 8 elements or a callable"):
        router.add(torch.float32, "sum", None, 8, 0, None, 42, None)
    with pytest.raises(TypeError, match="agree must be None, a Step of 0 elements or a callable"):
        router.add(torch.float32, "sum", None, 8, 0, "agree", part("run"), None)
