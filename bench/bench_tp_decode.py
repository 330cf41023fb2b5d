"""Tensor-parallel greedy decode of a transformers model: gloo, artune and DeepSpeed AutoTP side by side in one run.

    python bench/bench_tp_decode.py [--world-sizes 2,4] [--rounds 5] [--new-tokens 24] [--prompt-tokens 32]

The workload CPU tensor parallelism exists for: an LLM split across ranks,
decoding one token at a time. A Llama-shaped model (hidden 1024, 8 layers, 16
heads, bf16, random weights; ``--layers`` and friends change it) is made here
and saved with ``save_pretrained`` to a temporary folder; nothing comes from a
hub. Per world size, three jobs of W ranks each start at once:

- ``gloo``: ``init_process_group("gloo")``, ``from_pretrained(path, tp_plan="auto")``
  (transformers' own plan: DTensor and ``dist.all_reduce``);
- ``artune``: the same with ``init_process_group("artune")``, nothing else changed;
- ``deepspeed``: ``init_process_group("gloo")``, the unsharded model, then
  ``deepspeed.init_inference(model, tensor_parallel={"tp_size": W})`` (AutoTP;
  its all-reduces take DeepSpeed's shared-memory kernel, which is checked).
- ``none``: gloo's ranks again, the decode's collectives returning a stand-in
  of the right shape at once: the same compute with no communication (the
  tokens mean nothing), the measured floor.

Each job loads the model and runs one untimed generation; then the jobs take
turns, one greedy generation each per round (the order rotates every round),
so drift on this shared VM hits all of them alike; the idle jobs wait on a
queue and use no CPU. A generation is ``model.generate`` with a fixed prompt
and exactly ``--new-tokens`` new tokens; a streamer stamps each token.

Every collective the model issues is counted and timed (wall time, waiting for
the slower rank included) at its Python entry point: ``dist.all_reduce`` and
friends, the functional collectives DTensor uses (waited for, as DTensor does
at once), and DeepSpeed's ``inference_all_reduce``. On the artune job, the
calls that reached the process group are counted too and must match.

Per backend (and ``none``) and world size it prints: ms per decoded token (the slowest rank's
decode time per generation; median and p20-p80 over generations), prefill (the
prompt's forward and the first token), collectives per token and their time
(the slowest rank's), the floor (ms per token with that rank's collective time
subtracted: the token at zero-cost communication) and the share of a token
that is communication, the ratio t(gloo)/t(backend), and whether the tokens
equal gloo's. Then the collectives per token by kind and size, and notes:
artune's decision for the all-reduce, how much of its all-reduce time is spent
inside the Communicator, DeepSpeed's shm path check.

Ranks use one thread each, rank r pinned to CPU r mod the CPU count (4 ranks
on 2 cores: two per core). Needs the bench extra: ``pip install -e .[bench]``.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import os
import platform
import queue
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

import numpy as np

from artune.launch import RankContext, run_ranks

BACKENDS = ("gloo", "artune", "deepspeed")
READY_TIMEOUT = 900.0  # loading, the warm-up generation and (the first time) DeepSpeed's op build
TURN_TIMEOUT = 600.0  # one generation; every wait has a deadline
QUIET = {
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "TRANSFORMERS_VERBOSITY": "error",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1",
    "PYTHONWARNINGS": "ignore",
    "DS_ACCELERATOR": "cpu",
}


@dataclass(frozen=True)
class Shape:
    """The model made for the bench (Llama-shaped, random weights)."""

    hidden: int = 1024
    layers: int = 8
    heads: int = 16
    intermediate: int = 2816
    vocab: int = 32000


@dataclass(frozen=True)
class Run:
    """What one rank needs to know about the run."""

    model_dir: str
    prompt_tokens: int
    new_tokens: int


# ------------------------------------------------------------------ the model


def make_model(path: str, shape: Shape) -> None:
    """A Llama-shaped bf16 model with seeded random weights, saved with ``save_pretrained``."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        hidden_size=shape.hidden,
        intermediate_size=shape.intermediate,
        num_hidden_layers=shape.layers,
        num_attention_heads=shape.heads,
        num_key_value_heads=shape.heads,
        vocab_size=shape.vocab,
        max_position_embeddings=1024,
    )
    torch.manual_seed(0)
    LlamaForCausalLM(config).to(torch.bfloat16).save_pretrained(path)


def _load(backend: str, model_dir: str, world: int) -> Any:
    import torch
    from transformers import AutoModelForCausalLM

    if backend == "deepspeed":
        import deepspeed

        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16)
        engine = deepspeed.init_inference(
            model, tensor_parallel={"tp_size": world}, dtype=torch.bfloat16, replace_with_kernel_inject=False
        )
        return engine.module
    try:  # the current spelling; tp_plan= alone is the older one
        from transformers import DistributedConfig

        return AutoModelForCausalLM.from_pretrained(
            model_dir, dtype=torch.bfloat16, distributed_config=DistributedConfig(tp_plan="auto")
        )
    except ImportError:
        return AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16, tp_plan="auto")


# ------------------------------------------------------------------ what a rank measures


class Collectives:
    """Counts and times the collectives issued on this rank, at their Python entry points.

    The time of a call is its wall time until the result is there (a
    functional collective's wait included), so it holds the wait for the
    slower rank. A call made inside another one (DeepSpeed falling back to
    ``dist.all_reduce``) is counted apart, as ``nested``, and not timed twice.
    """

    def __init__(self) -> None:
        self.calls: Counter[tuple[str, str, int]] = Counter()  # (kind, entry point, bytes per rank)
        self.seconds: defaultdict[str, float] = defaultdict(float)  # by kind
        self.nested: Counter[str] = Counter()
        #: the no-communication floor: the decode's collectives return a stand-in of the right shape at once
        #: (so the tokens mean nothing); any other collective still runs and is counted
        self.skip = False
        self._depth = 0

    def install(self, module: Any, name: str, kind: str, label: str) -> None:
        real = getattr(module, name, None)
        if real is None:
            return
        from torch.distributed._functional_collectives import AsyncCollectiveTensor

        stand_in = _STAND_INS.get(label)

        def timed(*args: Any, **kwargs: Any) -> Any:
            if self._depth:
                self.nested[label] += 1
                return real(*args, **kwargs)
            if self.skip and stand_in is not None:
                return stand_in(*args, **kwargs)
            self._depth += 1
            start = time.perf_counter()
            try:
                out = real(*args, **kwargs)
                if isinstance(out, AsyncCollectiveTensor):
                    out = out.wait()
            finally:
                self.seconds[kind] += time.perf_counter() - start
                self._depth -= 1
            self.calls[(kind, label, _nbytes(args, kwargs))] += 1
            return out

        setattr(module, name, timed)

    def install_all(self) -> None:
        import torch.distributed as dist
        import torch.distributed._functional_collectives as funcol

        for module, prefix, names in (
            (dist, "dist", ("all_reduce", "all_gather", "all_gather_into_tensor", "broadcast", "reduce_scatter_tensor",
                            "barrier", "all_to_all_single", "all_gather_object", "broadcast_object_list", "reduce")),
            (funcol, "funcol", ("all_reduce", "all_gather_single", "all_gather_tensor", "reduce_scatter_single",
                                "reduce_scatter_tensor", "all_to_all_single", "broadcast", "all_reduce_coalesced",
                                "all_gather_single_coalesced")),
        ):  # fmt: skip
            for name in names:
                self.install(module, name, _kind(name), f"{prefix}.{name}")
        with contextlib.suppress(ImportError):
            if "deepspeed" in sys.modules:
                import deepspeed.comm as dscomm

                self.install(dscomm, "inference_all_reduce", "all_reduce", "deepspeed.inference_all_reduce")

    def snapshot(self) -> tuple[Counter, dict[str, float]]:
        return Counter(self.calls), dict(self.seconds)


def _gathered(tensor: Any, gather_dim: int, *_args: Any, **_kwargs: Any) -> Any:
    import torch
    import torch.distributed as dist

    return torch.cat([tensor] * dist.get_world_size(), dim=gather_dim)


#: what the decode's collectives return in the no-communication run: their input (an all-reduce, in place or not),
#: world size copies of it (an all-gather)
_STAND_INS = {
    "dist.all_reduce": lambda *args, **kwargs: None,
    "funcol.all_reduce": lambda tensor, *args, **kwargs: tensor,
    "funcol.all_gather_single": _gathered,
    "funcol.all_gather_tensor": _gathered,
}


def _kind(name: str) -> str:
    for kind in ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all", "barrier"):
        if name.startswith(kind):
            return kind
    return name


def _nbytes(args: tuple, kwargs: dict) -> int:
    import torch

    first = args[0] if args else next(iter(kwargs.values()), None)
    if isinstance(first, (list, tuple)) and first:
        first = first[0]
    return first.numel() * first.element_size() if isinstance(first, torch.Tensor) else 0


class _TokenClock:
    """A generate() streamer that stamps the prompt and each new token (and ends the prefill phase)."""

    def __init__(self, collectives: Collectives) -> None:
        self.stamps: list[float] = []
        self.tokens: list[int] = []
        self.at_first: tuple[Counter, dict[str, float]] | None = None
        self._collectives = collectives
        self._prompt_seen = False

    def put(self, value: Any) -> None:
        now = time.perf_counter()
        if not self._prompt_seen:  # generate() hands over the prompt first
            self._prompt_seen = True
            return
        self.stamps.append(now)
        self.tokens.extend(int(t) for t in value.reshape(-1))
        if self.at_first is None:
            self.at_first = self._collectives.snapshot()

    def end(self) -> None:
        pass


def _generate(model: Any, prompt: Any, new_tokens: int, collectives: Collectives) -> dict:
    import torch

    clock = _TokenClock(collectives)
    before = collectives.snapshot()
    start = time.perf_counter()
    with torch.no_grad():
        model.generate(
            prompt,
            attention_mask=torch.ones_like(prompt),
            max_new_tokens=new_tokens,
            min_new_tokens=new_tokens,
            do_sample=False,
            pad_token_id=0,
            streamer=clock,
        )
    after = collectives.snapshot()
    first = clock.at_first
    if first is None or len(clock.stamps) != new_tokens:
        raise RuntimeError(f"generate() produced {len(clock.stamps)} tokens, not {new_tokens}")
    return {
        "prefill_s": clock.stamps[0] - start,
        "decode_s": clock.stamps[-1] - clock.stamps[0],
        "tokens": clock.tokens,
        # the decode phase: the forwards after the first token
        "calls": after[0] - first[0],
        "seconds": {k: after[1].get(k, 0.0) - first[1].get(k, 0.0) for k in after[1]},
        "prefill_calls": first[0] - before[0],
        "all_seconds": {k: after[1].get(k, 0.0) - before[1].get(k, 0.0) for k in after[1]},
    }


# ------------------------------------------------------------------ a rank


def _rank(ctx: RankContext, backend: str, run: Run, turns: Any, done: Any) -> dict:
    for key, value in QUIET.items():
        os.environ.setdefault(key, value)
    import warnings

    warnings.filterwarnings("ignore")
    import torch
    import transformers

    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    if hasattr(os, "sched_setaffinity"):
        cpus = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpus[ctx.rank % len(cpus)]})
    notes: list[str] = []
    census: Counter[str] = Counter()
    inside: defaultdict[str, list] = defaultdict(lambda: [0.0, 0])  # inside Communicator.all_reduce: seconds, calls
    if backend == "artune":
        _count_group_calls(census)
        _time_communicator(inside)
    with contextlib.redirect_stdout(sys.stderr):  # DeepSpeed prints as it builds and loads
        model = _load(backend, run.model_dir, ctx.world_size)
    collectives = Collectives()
    collectives.install_all()
    if backend == "deepspeed":
        notes.extend(_deepspeed_check(ctx.world_size))
    prompt = torch.randint(1, 32000, (1, run.prompt_tokens), generator=torch.Generator().manual_seed(1))
    prompt = prompt % model.config.vocab_size
    _generate(model, prompt, run.new_tokens, collectives)  # warm-up, untimed
    census.clear()
    inside.clear()
    collectives.nested.clear()  # the Communicator's set-up calls (artune) are not the decode's
    done.put((backend, ctx.rank, "ready"))
    records: dict[str, list[dict]] = defaultdict(list)  # by mode: the backend, or "none" (the floor, gloo's job)
    while True:
        try:
            message = turns.get(timeout=TURN_TIMEOUT + READY_TIMEOUT)
        except queue.Empty:
            raise RuntimeError(
                f"{backend} rank {ctx.rank}: no turn within {TURN_TIMEOUT + READY_TIMEOUT:.0f} s"
            ) from None
        if message == "stop":
            break
        collectives.skip = message == "none"
        records[message].append(_generate(model, prompt, run.new_tokens, collectives))
        collectives.skip = False
        done.put((backend, ctx.rank, "done"))
    if backend == "artune":
        notes.extend(_artune_notes(census, records[backend], inside))
    if collectives.nested:
        notes.append(f"calls made inside other collectives in the timed generations: {dict(collectives.nested)}")
    return {"records": dict(records), "notes": notes}


def _count_group_calls(census: Counter[str]) -> None:
    """Count every call that reaches the artune process group (not its Communicator's own calls)."""
    from artune.backend.process_group import ArtuneProcessGroup

    names = ("allreduce", "allreduce_coalesced", "broadcast", "barrier", "allgather", "allgather_coalesced",
             "all_gather_single", "reduce_scatter_single", "all_gather_single_coalesced",
             "allgather_into_tensor_coalesced", "reduce_scatter_single_coalesced", "reduce_scatter_tensor_coalesced",
             "reduce_scatter", "reduce", "gather", "scatter", "alltoall", "all_to_all_single", "send",
             "recv")  # fmt: skip
    for name in names:
        real = getattr(ArtuneProcessGroup, name)

        def counted(self: Any, *args: Any, _real: Any = real, _name: str = name, **kwargs: Any) -> Any:
            if not self._direct():
                census[_name] += 1
            return _real(self, *args, **kwargs)

        setattr(ArtuneProcessGroup, name, counted)


def _time_communicator(inside: defaultdict[str, list]) -> None:
    """Time ``Communicator.all_reduce``: the decode's all-reduces (float) apart from its all-gathers (integer)."""
    from artune.communicator import Communicator

    real = Communicator.all_reduce

    def timed(self: Any, tensor: Any, *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return real(self, tensor, *args, **kwargs)
        finally:
            spent = inside["all_reduce" if tensor.is_floating_point() else "all_gather"]
            spent[0] += time.perf_counter() - start
            spent[1] += 1

    Communicator.all_reduce = timed


def _artune_notes(census: Counter[str], records: list[dict], inside: dict[str, list]) -> list[str]:
    import torch
    import torch.distributed as dist

    from artune.backend import communicator

    notes = []
    counted = sum(sum(r["calls"].values()) + sum(r["prefill_calls"].values()) for r in records)
    reached = sum(census.values())
    if counted != reached:
        notes.append(f"MISMATCH: the entry points counted {counted} collectives, the artune group got {reached}")
    else:
        notes.append(f"every collective that reached the artune group was counted ({reached}: {dict(census)})")
    group = dist.distributed_c10d._get_default_group()
    notes.append(f"all-reduces run by: {dict(group.allreduce_calls)}")
    comm = communicator()
    sizes = sorted({n for r in records for (k, _, n) in r["calls"] if k == "all_reduce"})
    for nbytes in sizes:
        decision = comm.decide(torch.empty(nbytes // 2, dtype=torch.bfloat16))
        notes.append(f"all_reduce {nbytes} B bf16 -> {decision.algorithm}: {decision.reason}")
    for kind, (seconds, n) in sorted(inside.items()):
        entry_calls = sum(
            c for r in records for key in ("calls", "prefill_calls") for (k, _, _), c in r[key].items() if k == kind
        )
        entry_seconds = sum(r["all_seconds"].get(kind, 0.0) for r in records)
        notes.append(
            f"{kind}, timed generations, per call: {entry_seconds / max(entry_calls, 1) * 1e6:.1f} us at the entry "
            f"point, {seconds / max(n, 1) * 1e6:.1f} us of it inside Communicator.all_reduce ({entry_calls} calls)"
        )
    return notes


def _deepspeed_check(world: int) -> list[str]:
    """Whether AutoTP's all-reduces take DeepSpeed's shared-memory kernel (else they fall back to torch's)."""
    import deepspeed
    import deepspeed.comm as dscomm

    cdb = dscomm.comm.cdb
    problems = []
    if getattr(cdb, "shm_comm_op", None) is None:
        problems.append("the shm op did not load")
    if getattr(cdb, "shm_vector_kernel_level", 0) < 2:
        problems.append(f"shm_vector_kernel_level={getattr(cdb, 'shm_vector_kernel_level', None)} (bf16 needs 2)")
    if os.environ.get("LOCAL_SIZE") != str(world):
        problems.append("LOCAL_SIZE is not the world size")
    state = "verified" if not problems else "NOT taken: " + "; ".join(problems)
    return [f"deepspeed {deepspeed.__version__}: shm all-reduce path {state}"]


# ------------------------------------------------------------------ the run


class _Job:
    """W ranks of one backend in a thread of the parent, taking turns through per-rank queues."""

    def __init__(self, backend: str, world: int, run: Run, done: Any, env: dict[str, str]) -> None:
        import multiprocessing as mp

        ctx = mp.get_context("spawn")
        self.backend = backend
        self.world = world
        self.turns = [ctx.Queue() for _ in range(world)]
        self.result: list[dict] | None = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, args=(run, done, env), daemon=True)
        self._thread.start()

    def _main(self, run: Run, done: Any, env: dict[str, str]) -> None:
        # the rank function is called per rank with its own queue: run_ranks passes the same args to every rank
        try:
            self.result = run_ranks(
                _job_rank, self.world, self.backend, run, self.turns, done,
                timeout=READY_TIMEOUT + 40 * TURN_TIMEOUT, env=env,
                backend="artune" if self.backend == "artune" else "gloo",
            )  # fmt: skip
        except BaseException as err:  # reported by the parent
            self.error = err

    def alive(self) -> bool:
        return self._thread.is_alive()

    def send(self, message: str) -> None:
        for q in self.turns:
            q.put(message)

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)


def _job_rank(ctx: RankContext, backend: str, run: Run, turns: list, done: Any) -> dict:
    return _rank(ctx, backend, run, turns[ctx.rank], done)


class _Mailbox:
    """The ranks' "ready"/"done" messages, kept by backend so that waiting for one job drops nothing of another's."""

    def __init__(self, done: Any, jobs: dict[str, _Job]) -> None:
        self._done = done
        self._jobs = jobs
        self._got: Counter[tuple[str, str]] = Counter()

    def wait(self, backend: str, what: str, timeout: float) -> None:
        """Take ``what`` from each of ``backend``'s ranks; raise when its job died or the deadline passed."""
        want = self._jobs[backend].world
        deadline = time.monotonic() + timeout
        while self._got[(backend, what)] < want:
            try:
                name, _rank_id, status = self._done.get(timeout=0.5)
                self._got[(name, status)] += 1
                continue
            except queue.Empty:
                pass
            job = self._jobs[backend]
            if not job.alive():
                raise RuntimeError(f"{backend} ranks stopped: {job.error}")
            if time.monotonic() > deadline:
                got = self._got[(backend, what)]
                raise RuntimeError(f"{backend}: {what} from {got} of {want} ranks within {timeout:.0f} s")
        self._got[(backend, what)] -= want


def run_world(world: int, backends: list[str], run: Run, rounds: int) -> tuple[dict[str, list[dict]], list[str]]:
    """Start one job per backend, let them take turns for ``rounds`` rounds; return each job's ranks' results."""
    import multiprocessing as mp

    done = mp.get_context("spawn").Queue()
    env = dict(QUIET, LOCAL_SIZE=str(world))  # LOCAL_SIZE: DeepSpeed's shm kernel needs it (its launcher sets it)
    env.setdefault("TORCH_EXTENSIONS_DIR", os.path.join(os.environ.get("TMPDIR", "/tmp"), "ds_torch_ext"))
    notes: list[str] = []
    jobs = {b: _Job(b, world, run, done, env) for b in backends}
    mail = _Mailbox(done, jobs)
    live = []
    for backend in backends:  # all jobs load at once; wait for each to be ready
        try:
            mail.wait(backend, "ready", READY_TIMEOUT)
            live.append(backend)
        except RuntimeError as err:
            if backend != "deepspeed":
                raise
            notes.append(f"deepspeed left out at world size {world}: {_first_line(err)}")
    # (job, mode): the no-communication floor runs on gloo's ranks
    turns = [(b, b) for b in live] + ([("gloo", "none")] if "gloo" in live else [])
    for r in range(rounds):
        for backend, mode in turns[r % len(turns) :] + turns[: r % len(turns)]:
            jobs[backend].send(mode)
            mail.wait(backend, "done", TURN_TIMEOUT)
    results = {}
    for backend in live:
        jobs[backend].send("stop")
    for backend in live:
        job = jobs[backend]
        job.join(120.0)
        if job.result is None:
            raise RuntimeError(f"{backend} ranks did not return: {job.error}")
        results[backend] = job.result
    return results, notes


def _first_line(err: BaseException) -> str:
    lines = [line for line in str(err).splitlines() if line.strip() and not line.startswith("---")]
    tail = [line for line in lines if "Error" in line or "error" in line]
    return (tail[-1] if tail else lines[-1] if lines else repr(err))[:300]


# ------------------------------------------------------------------ the report


@dataclass(frozen=True)
class Figures:
    """One backend at one world size, the slowest rank per generation."""

    ms_token: np.ndarray
    prefill_ms: np.ndarray
    comm_ms_token: np.ndarray
    floor_ms_token: np.ndarray
    calls_token: float
    kinds: dict[str, tuple[float, float, str]]  # kind -> (calls per token, ms per token, sizes)
    tokens: list[list[int]]  # per generation (rank 0); ranks checked equal


def figures(ranks: list[list[dict]], new_tokens: int, check_ranks: bool = True) -> Figures:
    """The figures of one mode from each rank's generation records (``check_ranks``: their tokens must agree)."""
    steps = new_tokens - 1  # decode forwards after the first token
    gens = len(ranks[0])
    ms, prefill, comm, floor = [], [], [], []
    for g in range(gens):
        recs = [r[g] for r in ranks]
        if check_ranks and any(rec["tokens"] != recs[0]["tokens"] for rec in recs):
            raise RuntimeError(f"ranks produced different tokens in generation {g}")
        ms.append(max(rec["decode_s"] for rec in recs) / steps * 1e3)
        prefill.append(max(rec["prefill_s"] for rec in recs) * 1e3)
        comm.append(max(sum(rec["seconds"].values()) for rec in recs) / steps * 1e3)
        floor.append(max(rec["decode_s"] - sum(rec["seconds"].values()) for rec in recs) / steps * 1e3)
    kinds: dict[str, tuple[float, float, str]] = {}
    calls: Counter = sum((rec["calls"] for rec in ranks[0]), Counter())  # every rank makes the same calls
    for kind in sorted({k for k, _, _ in calls}):
        n = sum(v for (k, _, _), v in calls.items() if k == kind) / gens / steps
        sizes = ", ".join(
            f"{v / gens / steps:g} x {_fmt_bytes(b)} ({label})"
            for (k, label, b), v in sorted(calls.items())
            if k == kind
        )
        seconds = [max(r[g]["seconds"].get(kind, 0.0) for r in ranks) for g in range(gens)]
        kinds[kind] = (n, float(np.median(seconds)) / steps * 1e3, sizes)
    return Figures(
        ms_token=np.array(ms),
        prefill_ms=np.array(prefill),
        comm_ms_token=np.array(comm),
        floor_ms_token=np.array(floor),
        calls_token=sum(calls.values()) / gens / steps,
        kinds=kinds,
        tokens=[rec["tokens"] for rec in ranks[0]],
    )


def _fmt_bytes(n: int) -> str:
    return f"{n / 1024:g} KiB" if n >= 1024 else f"{n} B"


def _med(a: np.ndarray, digits: int = 1) -> str:
    p20, med, p80 = np.percentile(a, [20, 50, 80])
    return f"{med:.{digits}f} ({p20:.{digits}f}-{p80:.{digits}f})"


def _same_tokens(a: list[list[int]], b: list[list[int]]) -> str:
    for g, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            i = next((i for i, (p, q) in enumerate(zip(x, y, strict=False)) if p != q), min(len(x), len(y)))
            return f"no (from token {i})" if g == 0 else f"no (generation {g}, token {i})"
    return "yes"


def report(all_figures: dict[int, dict[str, Figures]]) -> None:
    print(
        "| ranks | backend | ms/token med (p20-p80) | prefill ms | collectives/token | comm ms/token | comm share "
        "| subtracted floor ms/token | above no-comm ms/token | t(gloo)/t(this) | tokens = gloo's |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|:---:|")
    for world, by_mode in all_figures.items():
        gloo, none = by_mode.get("gloo"), by_mode.get("none")
        for name, f in by_mode.items():
            med = float(np.median(f.ms_token))
            share = float(np.median(f.comm_ms_token / f.ms_token)) * 100
            ratio = f"{float(np.median(gloo.ms_token)) / med:.2f}x" if gloo else "-"
            above = f"{med - float(np.median(none.ms_token)):.1f}" if none and name != "none" else "-"
            same = "-" if name == "none" or not gloo else _same_tokens(f.tokens, gloo.tokens)
            if name != "none" and len({tuple(t) for t in f.tokens}) > 1:
                same += " (generations differ)"
            label = "none (no communication)" if name == "none" else name
            print(
                f"| {world} | {label} | {_med(f.ms_token)} | {float(np.median(f.prefill_ms)):.0f} | {f.calls_token:g} "
                f"| {_med(f.comm_ms_token, 2)} | {share:.1f}% | {_med(f.floor_ms_token)} | {above} | {ratio} "
                f"| {same} |"
            )
    print("\nCollectives per decoded token, by kind (the slowest rank's time; bytes per rank):\n")
    print("| ranks | backend | kind | calls/token | ms/token | us/call | calls |")
    print("|---:|---|---|---:|---:|---:|---|")
    for world, by_mode in all_figures.items():
        for name, f in by_mode.items():
            for kind, (n, ms, sizes) in f.kinds.items():
                print(f"| {world} | {name} | {kind} | {n:g} | {ms:.2f} | {ms / n * 1e3:.0f} | {sizes} |")


def _versions() -> str:
    import torch
    import transformers

    parts = [f"torch {torch.__version__}", f"transformers {transformers.__version__}"]
    with contextlib.suppress(Exception):
        import deepspeed

        parts.append(f"deepspeed {deepspeed.__version__}")
    return ", ".join(parts)


def _cpu() -> str:
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return f"{line.split(':', 1)[1].strip()}, {os.cpu_count()} CPUs"
    return f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--world-sizes", default="2,4", help="comma-separated; 4 on 2 cores is oversubscribed")
    parser.add_argument("--backends", default=",".join(BACKENDS), help="comma-separated, from " + ", ".join(BACKENDS))
    parser.add_argument("--rounds", type=int, default=5, help="timed generations per backend and world size")
    parser.add_argument("--new-tokens", type=int, default=24)
    parser.add_argument("--prompt-tokens", type=int, default=32)
    parser.add_argument("--layers", type=int, default=Shape.layers)
    parser.add_argument("--hidden", type=int, default=Shape.hidden)
    parser.add_argument("--heads", type=int, default=Shape.heads)
    parser.add_argument("--intermediate", type=int, default=Shape.intermediate)
    args = parser.parse_args(argv)
    try:
        import transformers  # noqa: F401
    except ImportError:
        parser.error("this bench needs transformers: pip install -e .[bench]")
    backends = [b for b in args.backends.split(",") if b]
    if unknown := [b for b in backends if b not in BACKENDS]:
        parser.error(f"unknown backend(s) {unknown}; choose from {', '.join(BACKENDS)}")
    notes: list[str] = []
    if "deepspeed" in backends:
        try:
            with contextlib.redirect_stdout(sys.stderr):
                import deepspeed  # noqa: F401
        except Exception as err:
            backends.remove("deepspeed")
            notes.append(f"deepspeed left out: import deepspeed failed ({type(err).__name__}: {err})")
    if args.new_tokens < 2 or args.rounds < 1:
        parser.error("--new-tokens must be at least 2 and --rounds at least 1")
    worlds = [int(w) for w in args.world_sizes.split(",")]
    shape = Shape(args.hidden, args.layers, args.heads, args.intermediate)
    started = time.monotonic()
    segments = f"/dev/shm/deepspeed_allreduce_buffer_{os.getuid()}_*"
    existing = set(glob.glob(segments))
    all_figures: dict[int, dict[str, Figures]] = {}
    rank_notes: dict[tuple[int, str], list[str]] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="artune-tp-model-") as model_dir:
            make_model(model_dir, shape)
            run = Run(model_dir, args.prompt_tokens, args.new_tokens)
            for world in worlds:
                results, world_notes = run_world(world, backends, run, args.rounds)
                notes.extend(world_notes)
                modes = [m for m in (*BACKENDS, "none") if any(m in ranks[0]["records"] for ranks in results.values())]
                all_figures[world] = {
                    mode: figures([r["records"][mode] for r in ranks], args.new_tokens, check_ranks=mode != "none")
                    for mode in modes
                    for ranks in results.values()
                    if mode in ranks[0]["records"]
                }
                for b, ranks in results.items():
                    rank_notes[(world, b)] = ranks[0]["notes"]
    finally:
        for path in set(glob.glob(segments)) - existing:  # DeepSpeed never unlinks its segments
            with contextlib.suppress(OSError):
                os.unlink(path)
    print(
        f"Greedy decode, Llama-shaped bf16 model (hidden {shape.hidden}, {shape.layers} layers, {shape.heads} heads, "
        f"intermediate {shape.intermediate}, vocab {shape.vocab}, random weights), prompt {args.prompt_tokens} tokens, "
        f"{args.new_tokens} new tokens, {args.rounds} generations per backend interleaved; one thread per rank; "
        f"{_versions()}; {_cpu()}; {time.monotonic() - started:.0f} s\n"
    )
    report(all_figures)
    print()
    for (world, backend), lines in rank_notes.items():
        for line in lines:
            print(f"- {world} ranks, {backend} (rank 0): {line}")
    for line in notes:
        print(f"- {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
