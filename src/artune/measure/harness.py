"""The measuring harness: check and time all-reduce candidates inside every rank.

``measure`` is collective: every rank of the group calls it with the same
arguments and gets the same list of ``Measurement`` s back. Per size it

1. allocates the message tensor once;
2. checks each candidate: every rank fills its input from a generator seeded
   by (seed, rank, size) with small integers, so every summation order is
   exact in every dtype, computes the expected reduction of all ranks' inputs
   locally, runs one all-reduce and counts wrong elements (``nwrong``, summed
   over ranks); the result must also be bit-identical across ranks. A
   candidate that is unavailable, raises, or is wrong gets an explicit failed
   measurement (``invalid``/``runtime``/``timeout``) and is not timed;
3. estimates each candidate's cost from a few calls on zeros (zeros stay zeros
   under repeated in-place summation: no inf/NaN growth), agreed across ranks
   by a MAX all-reduce on the process group, and sizes blocks of rounds from
   it (about a tenth of the time budget each);
4. warms up, then times the candidates interleaved in turns (A A A B B B
   A A A ...: each turn starts with an untimed call that absorbs the rank
   skew the previous candidate left), each call timed by the ``Timer``
   (``artune.measure.timers``: the host's ``time.perf_counter_ns`` on CPU,
   CUDA events or CUDA-graph replays on a GPU),
   with the garbage collector paused, block after block until the budget is
   spent: between blocks the ranks agree on the elapsed time (MAX), so they
   stop after the same round and a bad estimate cannot overrun the budget by
   more than a block. Then one MAX all-reduce over the sample vectors gives
   each iteration's slowest rank, which is the step time recorded.

Control messages (agreement, samples, errors) go over the process group and
never inside a timed region.
"""

from __future__ import annotations

import functools
import gc
import hashlib
import itertools
import logging
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.distributed as dist

from artune.errors import ArtuneError, PeerTimeout
from artune.measure.cuda_timing import EventTimer, GraphTimer
from artune.measure.records import Candidate, Measurement
from artune.measure.reducers import Reducer
from artune.measure.stats import summarize
from artune.measure.timers import Timer, TimingSpec, WallTimer
from artune.sizes import format_size

log = logging.getLogger(__name__)

#: ``progress(done, total, text)``: called on every rank as sizes advance
Progress = Callable[[int, int, str], None]

_STATUS_PRIORITY = ("runtime", "invalid", "timeout")  # the root cause first: peers of a crash time out
_OPS = ("sum", "max", "min")


def make_timer(spec: TimingSpec) -> Timer:
    """The timer for ``spec``: the host's clock, CUDA events, or CUDA-graph replays."""
    if spec.timer == "wall":
        return WallTimer()
    return EventTimer() if spec.timer == "events" else GraphTimer(spec.calls_per_graph, spec.flush_l2)


def dtype_name(dtype: torch.dtype) -> str:
    """``torch.float32 -> "float32"``."""
    return str(dtype).removeprefix("torch.")


def parse_dtype(name: str) -> torch.dtype:
    """``"float32" -> torch.float32``; ``ArtuneError`` for names that are not torch dtypes."""
    value = getattr(torch, name, None)
    if not isinstance(value, torch.dtype):
        raise ArtuneError(f"unknown dtype {name!r}; write e.g. float32, bfloat16, float16, int32")
    return value


def candidates_for(comm: Reducer, names: Iterable[str] | None = None, *, sweep: bool = False) -> list[Candidate]:
    """Candidates for ``names`` (default: every algorithm of ``comm``).

    With ``sweep``, one candidate per combination of each algorithm's
    ``comm.tunables(name)`` values; otherwise one candidate per algorithm
    with its default parameters.
    """
    found: list[Candidate] = []
    for name in comm.algorithms if names is None else names:
        tunables: Mapping[str, Sequence[object]] = {}
        if sweep and name in comm.algorithms and hasattr(comm, "tunables"):
            tunables = comm.tunables(name)  # type: ignore[attr-defined]
        if not tunables:
            found.append(Candidate(name))
            continue
        keys = sorted(tunables)
        for values in itertools.product(*(tuple(tunables[k]) for k in keys)):
            found.append(Candidate.of(name, dict(zip(keys, values, strict=True))))  # type: ignore[arg-type]
    return found


@dataclass(frozen=True)
class _Failure:
    status: str
    error: str


def _failure(err: BaseException) -> _Failure:
    text = f"{type(err).__name__}: {err}".strip()
    timed_out = isinstance(err, (PeerTimeout, TimeoutError)) or "timed out" in str(err).lower()
    return _Failure("timeout" if timed_out else "runtime", text[:500])


class _Control:
    """Control-plane collectives over the process group (never inside a timed region)."""

    def __init__(self, group: dist.ProcessGroup | None) -> None:
        self.group = group
        self.rank = dist.get_rank(group)
        self.world_size = dist.get_world_size(group)

    def max(self, values: np.ndarray) -> np.ndarray:
        t = torch.from_numpy(np.ascontiguousarray(values, dtype=np.float64).ravel().copy())
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=self.group)
        return t.numpy().reshape(np.shape(values))

    def sum(self, values: np.ndarray) -> np.ndarray:
        t = torch.from_numpy(np.ascontiguousarray(values, dtype=np.float64).ravel().copy())
        dist.all_reduce(t, op=dist.ReduceOp.SUM, group=self.group)
        return t.numpy().reshape(np.shape(values))

    def gather(self, obj: object) -> list[object]:
        out: list[object] = [None] * self.world_size
        dist.all_gather_object(out, obj, group=self.group)
        return out

    def barrier(self) -> None:
        dist.barrier(group=self.group)


def _combine(per_rank: Sequence[_Failure | None]) -> _Failure | None:
    """One failure for all ranks: the most telling status, every failing rank's message."""
    failed = [(r, f) for r, f in enumerate(per_rank) if f is not None]
    if not failed:
        return None
    status = min((f.status for _, f in failed), key=_STATUS_PRIORITY.index)
    messages = list(dict.fromkeys(f.error for _, f in failed))
    if len(messages) == 1 and len(failed) == len(per_rank):
        return _Failure(status, messages[0])
    return _Failure(status, "; ".join(f"rank {r}: {f.error}" for r, f in failed))


def _agree_failures(control: _Control, local: list[_Failure | None]) -> list[_Failure | None]:
    """Every rank's view merged: a candidate failed anywhere failed everywhere (identical text)."""
    flags = control.max(np.array([f is not None for f in local], dtype=np.float64))
    if not flags.any():
        return [None] * len(local)
    gathered = control.gather(local)
    return [_combine([g[j] for g in gathered]) for j in range(len(local))]  # type: ignore[index]


# ------------------------------------------------------------------ correctness data


def _rank_input(seed: int, rank: int, nbytes: int, count: int, dtype: torch.dtype) -> torch.Tensor:
    """Rank ``rank``'s check input: small integers, exact in every dtype artune reduces."""
    gen = torch.Generator().manual_seed((seed * 1_000_003 + rank * 7_919 + nbytes) % (2**63))
    low = 0 if dtype == torch.uint8 else -4
    return torch.randint(low, 5, (count,), generator=gen, dtype=torch.int32)


def _check_data(
    seed: int, rank: int, world_size: int, nbytes: int, count: int, dtype: torch.dtype, op: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """(this rank's input, the expected result) in ``dtype``, computed locally."""
    mine: torch.Tensor | None = None
    expected: torch.Tensor | None = None
    for r in range(world_size):
        values = _rank_input(seed, r, nbytes, count, dtype)
        if r == rank:
            mine = values.to(dtype)
        if expected is None:
            expected = values
        elif op == "sum":
            expected = expected + values
        elif op == "max":
            expected = torch.maximum(expected, values)
        else:
            expected = torch.minimum(expected, values)
    assert mine is not None and expected is not None
    return mine, expected.to(dtype)


def _digest(tensor: torch.Tensor) -> str:
    return hashlib.blake2b(tensor.cpu().view(torch.uint8).numpy().tobytes(), digest_size=16).hexdigest()


def _available(comm: Reducer, dtype: torch.dtype, op: str, device: torch.device) -> frozenset[str]:
    """``comm.available`` for tensors on ``device`` (a reducer without a ``device`` argument serves CPU only)."""
    if device.type == "cpu":
        return comm.available(dtype, op)
    return comm.available(dtype, op, device)  # type: ignore[call-arg]


# ------------------------------------------------------------------ measure


@dataclass(frozen=True)
class Schedule:
    """How long and in what pattern each size is timed (see ``measure`` for the meaning of each field)."""

    budget_s: float = 1.0
    warmup_s: float | None = None
    min_iters: int = 10
    max_iters: int = 20_000
    estimate_calls: int = 3
    burst: int = 3
    settle: int = 1

    def __post_init__(self) -> None:
        if not (self.budget_s > 0 and math.isfinite(self.budget_s)):
            raise ArtuneError(f"measure(): budget_s must be a positive number of seconds, got {self.budget_s}")
        if self.warmup_s is not None and not self.warmup_s >= 0:
            raise ArtuneError(f"measure(): warmup_s must be >= 0, got {self.warmup_s}")
        if not 1 <= self.min_iters <= self.max_iters:
            raise ArtuneError(
                f"measure(): need 1 <= min_iters <= max_iters, got min_iters={self.min_iters}, "
                f"max_iters={self.max_iters}"
            )
        if self.burst < 1 or self.settle < 0 or self.estimate_calls < 1:
            raise ArtuneError(
                f"measure(): need burst >= 1, settle >= 0, estimate_calls >= 1, got burst={self.burst}, "
                f"settle={self.settle}, estimate_calls={self.estimate_calls}"
            )

    @property
    def warmup(self) -> float:
        """Warm-up seconds (default a tenth of the budget)."""
        return self.budget_s / 10 if self.warmup_s is None else self.warmup_s


def measure(
    comm: Reducer,
    candidates: Sequence[Candidate | str],
    sizes: Sequence[int],
    *,
    dtype: torch.dtype = torch.float32,
    op: str = "sum",
    budget_s: float = 1.0,
    min_iters: int = 10,
    max_iters: int = 20_000,
    warmup_s: float | None = None,
    estimate_calls: int = 3,
    burst: int = 3,
    settle: int = 1,
    check: bool = True,
    seed: int = 0,
    group: dist.ProcessGroup | None = None,
    progress: Progress | None = None,
    device: torch.device | str = "cpu",
    timer: Timer | None = None,
) -> list[Measurement]:
    """Check and time ``candidates`` at each of ``sizes`` (bytes); collective, identical on every rank.

    Args:
        comm: what runs the all-reduces: an ``artune.Communicator`` or any
            ``Reducer`` (e.g. a ``FunctionReducer``).
        candidates: ``Candidate`` s or algorithm names (default parameters).
        sizes: message sizes in bytes; each a multiple of ``dtype``'s size.
        dtype, op: the tensor dtype and the reduction (``sum``, ``max``, ``min``).
        budget_s: seconds of timed calls per size, shared by all candidates
            (rounds until the time is spent, agreed across ranks).
        min_iters, max_iters: bounds on the timed calls (samples) per candidate.
        warmup_s: seconds of untimed rounds before timing (default
            ``budget_s / 10``, at least one round).
        estimate_calls: timed calls per candidate for the cost estimate.
        burst, settle: a round gives each candidate in turn ``settle``
            untimed calls then ``burst`` timed ones (A A A A B B B B ...).
            The untimed call absorbs the rank skew the previous candidate
            left (a rank leaving gloo later than its peer would otherwise be
            charged to the next candidate); the turns keep the candidates
            interleaved at a fine grain, so drift hits them alike.
        check: run the correctness check (otherwise ``nwrong`` is ``-1``).
        seed: base seed of the check data.
        group: process group for the control messages (default ``comm.group``
            when it has one, else WORLD); it must reduce CPU tensors.
        progress: ``progress(done, total, text)`` called on every rank.
        device: where the message tensor lives (``"cuda"``: the current CUDA device).
        timer: the clock (default ``WallTimer``: the host's, per call). A
            graph timer captures each candidate after its correctness check
            (which runs eagerly, so the Communicator sees every call before
            any capture).

    Returns one ``Measurement`` per (size, candidate), sizes outer, in the
    order given. Failed candidates have a status other than ``"ok"`` and no
    samples; this function does not raise for them.
    """
    # over 60 lines only for its signature and the documentation of each argument; the body is short
    cands = _checked_arguments(candidates, sizes, dtype, op)
    schedule = Schedule(budget_s, warmup_s, min_iters, max_iters, estimate_calls, burst, settle)
    control = _Control(group if group is not None else getattr(comm, "group", None))
    clock = timer if timer is not None else WallTimer()
    where = torch.device(device)
    available = _available(comm, dtype, op, where)
    results: list[Measurement] = []
    for index, nbytes in enumerate(sizes):
        if progress is not None:
            progress(index, len(sizes), f"{format_size(nbytes)}: {len(cands)} candidates")
        results.extend(
            _measure_size(
                comm, control, cands, available, nbytes, dtype, op, schedule, clock, where, check=check, seed=seed
            )
        )
    if progress is not None:
        progress(len(sizes), len(sizes), "done")
    return results


def _checked_arguments(
    candidates: Sequence[Candidate | str], sizes: Sequence[int], dtype: torch.dtype, op: str
) -> list[Candidate]:
    """The candidates as ``Candidate`` s; ``ArtuneError`` for an unknown op, a repeated candidate or a size
    that is not a positive multiple of the dtype's size."""
    if op not in _OPS:
        raise ArtuneError(f"measure(): op {op!r} is not supported; use one of {', '.join(_OPS)}")
    cands = [c if isinstance(c, Candidate) else Candidate(c) for c in candidates]
    if len(set(cands)) != len(cands):
        raise ArtuneError(f"measure(): candidates repeat: {[c.key for c in cands]}")
    itemsize = torch.empty((), dtype=dtype).element_size()
    bad = [s for s in sizes if s <= 0 or s % itemsize]
    if bad:
        raise ArtuneError(
            f"measure(): sizes {bad} are not positive multiples of {itemsize} bytes ({dtype_name(dtype)})"
        )
    return cands


def _measure_size(
    comm: Reducer,
    control: _Control,
    cands: list[Candidate],
    available: frozenset[str],
    nbytes: int,
    dtype: torch.dtype,
    op: str,
    schedule: Schedule,
    timer: Timer,
    device: torch.device,
    *,
    check: bool,
    seed: int,
) -> list[Measurement]:
    """One size: check every candidate, estimate each one's cost, time them in turns; one row each."""
    count = nbytes // torch.empty((), dtype=dtype).element_size()
    tensor = torch.zeros(count, dtype=dtype, device=device)
    calls = [functools.partial(comm.all_reduce, tensor, op, algorithm=c.algorithm, params=c.params_dict) for c in cands]
    local = _unrunnable(comm, cands, available, dtype, op)
    if check:
        outcome, wrong = _checked(control, calls, local, tensor, nbytes, op, seed)
    else:
        outcome, wrong = _agree_failures(control, local), [-1] * len(cands)  # -1: not checked
    live = [j for j in range(len(cands)) if outcome[j] is None]
    timed, estimates = _estimated(control, calls, live, outcome, tensor, schedule, timer)
    live = [j for j in live if outcome[j] is None]
    samples, call = np.zeros((0, 0)), ""
    if live:
        samples, call = _timed(control, cands, timed, live, estimates, outcome, nbytes, schedule, timer)
    rows = dict(zip(live, samples, strict=True))
    results: list[Measurement] = []
    for j, cand in enumerate(cands):
        failure = outcome[j]
        row = rows.get(j) if failure is None else None
        results.append(
            Measurement(
                candidate=cand,
                size_bytes=nbytes,
                dtype=dtype_name(dtype),
                world_size=control.world_size,
                samples_us=tuple((row / 1e3).tolist()) if row is not None else (),
                nwrong=wrong[j],
                status=failure.status if failure else "ok",
                error=failure.error if failure else "",
                redop=op,
                burst=schedule.burst,
                call=call if row is not None else "",
            )
        )
    return results


def _timed(
    control: _Control,
    cands: list[Candidate],
    timed: list[Callable[[], object]],
    live: list[int],
    estimates: np.ndarray,
    outcome: list[_Failure | None],
    nbytes: int,
    schedule: Schedule,
    timer: Timer,
) -> tuple[np.ndarray, str]:
    """Step 3, collective: warm up and time the live calls in turns; the slowest rank's per-call ns (one row
    per live call) and the rounds' name. Marks in ``outcome`` the calls that failed."""
    round_s = max(float(sum(estimates[j] for j in live)) * (schedule.burst + schedule.settle), 1e-7)
    samples, local = _timed_loop([timed[j] for j in live], round_s, schedule, control, timer)
    for j, failure in zip(live, _agree_failures(control, local), strict=True):
        if failure is not None:
            outcome[j] = failure
    samples = control.max(samples)  # the slowest rank of each iteration
    log.debug(
        "%s: %d candidates, estimated round %.1f us, %d samples each",
        format_size(nbytes),
        len(live),
        round_s * 1e6,
        samples.shape[1],
    )
    return samples, _call_name(nbytes, [cands[j] for j in live], samples)


def _unrunnable(
    comm: Reducer, cands: list[Candidate], available: frozenset[str], dtype: torch.dtype, op: str
) -> list[_Failure | None]:
    """Step 1a, on this rank: why each candidate cannot run here (``None``: it can)."""
    local: list[_Failure | None] = [None] * len(cands)
    for j, cand in enumerate(cands):
        if cand.algorithm not in comm.algorithms:
            local[j] = _Failure("invalid", f"{cand.algorithm} is not runnable here ({', '.join(comm.algorithms)})")
        elif cand.algorithm not in available:
            local[j] = _Failure("invalid", f"{cand.algorithm} cannot reduce {dtype_name(dtype)} with {op!r} here")
    return local


def _checked(
    control: _Control,
    calls: list[Callable[[], object]],
    local: list[_Failure | None],
    tensor: torch.Tensor,
    nbytes: int,
    op: str,
    seed: int,
) -> tuple[list[_Failure | None], list[int]]:
    """Step 1b, collective: run each call this rank can run (``local`` None) on data whose result is known.
    Returns every rank's failures merged (a call that raised, was wrong or was not bit-identical across
    ranks) and the wrong elements per call summed over ranks (-1: did not run on every rank)."""
    k = len(calls)
    mine, expected = _check_data(seed, control.rank, control.world_size, nbytes, tensor.numel(), tensor.dtype, op)
    mine, expected = mine.to(tensor.device), expected.to(tensor.device)
    local = list(local)
    nwrong = np.full(k, -1.0)
    digests = [""] * k
    for j in range(k):
        if local[j] is not None:
            continue
        tensor.copy_(mine)
        try:
            calls[j]()
        except Exception as err:
            local[j] = _failure(err)
            continue
        nwrong[j] = float(torch.ne(tensor, expected).sum())
        digests[j] = _digest(tensor)
    del mine, expected
    outcome = _agree_failures(control, local)
    totals = control.sum(np.where(nwrong < 0, 0.0, nwrong))
    everyone = control.gather(digests)
    wrong = [-1] * k
    for j in range(k):
        if outcome[j] is not None:  # did not run everywhere: nothing to count
            continue
        wrong[j] = int(totals[j])
        if wrong[j] > 0:
            outcome[j] = _Failure("invalid", f"{wrong[j]} wrong elements (summed over ranks)")
        elif len({g[j] for g in everyone}) > 1:  # type: ignore[index]
            outcome[j] = _Failure("invalid", "results are not bit-identical across ranks")
    return outcome, wrong


def _estimated(
    control: _Control,
    calls: list[Callable[[], object]],
    live: list[int],
    outcome: list[_Failure | None],
    tensor: torch.Tensor,
    schedule: Schedule,
    timer: Timer,
) -> tuple[list[Callable[[], object]], np.ndarray]:
    """Step 2, collective: each live call as the timer runs it, and its cost in seconds (the slowest rank's),
    estimated on zeros (they stay finite under repeated in-place reduction); a graph timer captures here,
    after every rank ran each call eagerly in the check. Marks in ``outcome`` the calls that failed."""
    tensor.zero_()
    estimates = np.zeros(len(calls))
    local: list[_Failure | None] = [None] * len(calls)
    timed: list[Callable[[], object]] = list(calls)
    for j in live:
        try:
            timed[j] = timer.prepare(calls[j])
            timed[j]()
            durations = np.zeros(schedule.estimate_calls)
            timer.burst(timed[j], schedule.estimate_calls, durations, 0)
            estimates[j] = float(np.median(durations)) * 1e-9
        except Exception as err:
            local[j] = _failure(err)
    estimates = control.max(estimates)
    for j, failure in enumerate(_agree_failures(control, local)):
        if failure is not None and outcome[j] is None:
            outcome[j] = failure
    return timed, estimates


def _call_name(nbytes: int, cands: Sequence[Candidate], samples: np.ndarray) -> str:
    """A name for one size's timed rounds, the same on every rank (the samples are, after the MAX): the
    measurements it names were timed in turns with each other, so their samples pair up round by round."""
    digest = hashlib.blake2b(digest_size=8)
    digest.update(f"{nbytes} {' '.join(c.key for c in cands)}".encode())
    digest.update(np.ascontiguousarray(samples, dtype=np.float64).tobytes())
    return digest.hexdigest()


def _timed_loop(
    calls: list[Callable[[], object]],
    round_s: float,
    schedule: Schedule,
    control: _Control,
    timer: Timer | None = None,
) -> tuple[np.ndarray, list[_Failure | None]]:
    """Run rounds of turns: untimed rounds for the warm-up, then timed rounds for the budget.

    In a round each call takes its turn: ``settle`` untimed calls, then
    ``burst`` timed ones; odd rounds take the turns in reverse order, so no
    call always runs first or always follows the same one (a position in the
    round can be worth a percent or two: the paired comparison of
    ``artune.tune.compare`` would otherwise read it as a difference). Rounds run in blocks of about a tenth of the
    phase's time; between blocks (outside any timed call) the ranks agree on
    the elapsed time by a MAX all-reduce, so every rank stops after the same
    round, and a phase lasts about its time even when the estimate
    ``round_s`` was off. Returns the per-call nanoseconds (one row per call)
    and the failures: a call that raises is dropped from the rotation on
    this rank (its peers then fail in it too, by timeout).
    """
    turns = _Turns(calls, round_s, schedule, control, timer if timer is not None else WallTimer())
    min_rounds = math.ceil(schedule.min_iters / schedule.burst)
    max_rounds = max(min_rounds, schedule.max_iters // schedule.burst)
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        turns.phase(schedule.warmup, 1, max_rounds)
        samples = turns.phase(schedule.budget_s, min_rounds, max_rounds)
    finally:
        if gc_was_enabled:
            gc.enable()
    return samples, turns.failures


class _Turns:
    """The rotation of ``_timed_loop``: the calls still running on this rank, and each one's failure."""

    def __init__(
        self, calls: list[Callable[[], object]], round_s: float, schedule: Schedule, control: _Control, timer: Timer
    ) -> None:
        self.calls = calls
        self.round_s = round_s
        self.burst, self.settle = schedule.burst, schedule.settle
        self.control = control
        self.time_burst = timer.burst
        self.failures: list[_Failure | None] = [None] * len(calls)
        self.active = list(range(len(calls)))

    def run(self, rounds: int, samples: np.ndarray, start: int) -> None:
        """``rounds`` rounds of turns into ``samples`` (round ``start`` first: odd ones run in reverse)."""
        calls, burst, settle, failures = self.calls, self.burst, self.settle, self.failures
        for i in range(rounds):
            first = i * burst
            for j in self.active if (start + i) % 2 == 0 else self.active[::-1]:
                call = calls[j]
                try:
                    for _ in range(settle):
                        call()
                    self.time_burst(call, burst, samples[j], first)
                except Exception as err:
                    failures[j] = _failure(err)
            if any(f is not None for f in failures):
                self.active = [j for j in self.active if failures[j] is None]

    def phase(self, seconds: float, least: int, most: int) -> np.ndarray:
        """Blocks of rounds until every rank has spent ``seconds`` (at least ``least``, at most ``most``
        rounds); the per-call ns, one row per call."""
        control, clock, k = self.control, time.perf_counter_ns, len(self.calls)
        control.barrier()
        blocks: list[np.ndarray] = []
        done = 0
        began = clock()
        block = max(1, min(most, math.ceil(0.1 * seconds / self.round_s)))
        while True:
            blocks.append(np.zeros((k, block * self.burst)))
            self.run(block, blocks[-1], done)
            done += block
            elapsed = float(control.max(np.array([(clock() - began) * 1e-9]))[0])
            if done >= most or (done >= least and elapsed >= seconds):
                return np.concatenate(blocks, axis=1)
            per_round = max(elapsed / done, 1e-9)
            remaining = max(least - done, math.ceil((seconds - elapsed) / per_round))
            block = max(1, min(most - done, remaining, math.ceil(0.1 * seconds / per_round)))


# ------------------------------------------------------------------ memory copy floor


def memcpy_bandwidth(
    nbytes: int,
    *,
    budget_s: float = 0.3,
    min_iters: int = 5,
    group: dist.ProcessGroup | None = None,
) -> float:
    """One rank's ``dst.copy_(src)`` bandwidth in GB/s (1e9) for ``nbytes``, with all ranks copying at once.

    Collective: every rank times its own copies concurrently (like
    ``bench_memcpy``'s "2 processes x 1 thread"), takes its median, and the
    slowest rank's figure is returned on every rank.
    """
    if nbytes <= 0 or nbytes % 4:
        raise ArtuneError(f"memcpy_bandwidth(): nbytes must be a positive multiple of 4, got {nbytes}")
    control = _Control(group)
    src = torch.ones(nbytes // 4, dtype=torch.float32)
    dst = torch.empty_like(src)
    control.barrier()
    for _ in range(3):
        dst.copy_(src)
    start = time.perf_counter_ns()
    dst.copy_(src)
    estimate = max((time.perf_counter_ns() - start) * 1e-9, 1e-8)
    iters = int(control.max(np.array([max(min_iters, min(100_000, math.ceil(budget_s / estimate)))]))[0])
    durations = np.zeros(iters)
    clock = time.perf_counter_ns
    control.barrier()
    for i in range(iters):
        start = clock()
        dst.copy_(src)
        durations[i] = clock() - start
    median_s = summarize(durations).median * 1e-9
    slowest = float(control.max(np.array([median_s]))[0])
    return nbytes / slowest / 1e9
