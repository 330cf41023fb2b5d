"""The compiled shared-memory round: built, switchable, and bit-identical to the Python round's reductions.

The rounds themselves (both paths, and mixed groups) run in the shm suites:
test_algorithms_correctness, test_algorithms_failures, test_algorithms_stress.
"""

from __future__ import annotations

import os
import shutil

import pytest
import torch

from artune.algorithms.shm import native
from artune.algorithms.shm.algorithms import _PLANS, SUPPORTED_DTYPES, _reduce
from artune.algorithms.shm.channel import DTYPE_CODES, OP_CODES
from artune.launch import RankContext, run_ranks

MODULE = native._module  # the compiled module, whatever the switch says (the reductions are tested alone)
needs_module = pytest.mark.skipif(MODULE is None, reason="the compiled round is not built here")


def test_built_where_a_compiler_is() -> None:
    """`pip install -e .` (what `make test` runs) builds it on any machine with a C compiler."""
    if not (shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")):
        pytest.skip("no C compiler here: the Python round is the documented fallback")
    assert native._module is not None, native._IMPORT_ERROR


def test_switch_turns_it_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(native.ENV_SWITCH, "0")
    module, path = native.load()
    assert module is None and path.startswith("python") and f"{native.ENV_SWITCH}=0" in path
    monkeypatch.setenv(native.ENV_SWITCH, "1")
    assert native.load()[1].startswith("native") == (native._module is not None)


def _special(dtype: torch.dtype, n: int, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        x = torch.randn(n, generator=gen, dtype=torch.float64) * 3
        info = torch.finfo(dtype)
        specials = [
            0.0,
            -0.0,
            float("nan"),
            float("inf"),
            -float("inf"),
            info.max,
            -info.max,
            info.tiny,
            info.tiny / 4,
            -info.tiny / 8,
            info.eps,
            1.0,
            -1.0,
            65504.0,
            65520.0,
            1e-7,
            6e-8,
        ]
        idx = torch.randint(0, n, (n // 3,), generator=gen)
        x[idx] = torch.tensor(specials, dtype=torch.float64)[
            torch.randint(0, len(specials), (len(idx),), generator=gen)
        ]
        return x.to(dtype)
    info = torch.iinfo(dtype)
    return torch.randint(info.min, info.max, (n,), generator=gen, dtype=torch.int64).to(dtype)


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.view({1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])


@needs_module
@pytest.mark.parametrize("dtype", SUPPORTED_DTYPES, ids=str)
@pytest.mark.parametrize("op", ["sum", "max", "min"])
def test_reductions_match_the_python_round_bit_for_bit(dtype: torch.dtype, op: str) -> None:
    """Rank-order reductions with NaN, signed zeros, infinities, overflow and subnormals (incl. block tails)."""
    kind = _PLANS[(dtype, op)][2]
    for sources in (2, 3, 4):
        for n in (1, 7, 2048, 2048 * 2 + 13):
            srcs = [_special(dtype, n, 1000 * sources + 10 * n + r) for r in range(sources)]
            expected = srcs[0].clone()
            acc = torch.empty(n, dtype=torch.float32)
            _reduce(kind, (expected, *srcs[1:]), expected, acc)
            out = torch.empty(n, dtype=dtype)
            MODULE.reduce(DTYPE_CODES[dtype], OP_CODES[op], out.data_ptr(), [s.data_ptr() for s in srcs], n)
            if dtype.is_floating_point:
                # NaN payloads: IEEE leaves them open and torch's own kernels differ by length (e.g. fp16
                # maximum gives 0x7e00 below 32 elements, 0xffff above); both must be NaN at the same places
                nan = expected.isnan()
                assert torch.equal(nan, out.isnan()), (sources, n)
                expected, out = expected[~nan], out[~nan]
            differ = (_bits(expected) != _bits(out)).nonzero().flatten()[:5].tolist()
            assert not differ, (
                sources,
                n,
                [(srcs[r][differ].tolist()) for r in range(sources)],
                expected[differ].tolist(),
                out[differ].tolist(),
            )


def _cpu_hint_rank(ctx: RankContext, cpus: list[int]) -> dict[str, int]:
    """Pin this rank to ``cpus[rank]``, run one-shot and two-shot steps, and report the hint and the count."""
    import os
    import struct

    from artune.algorithms import open_algorithms
    from artune.algorithms.shm.channel import CPU_OFF

    cpu = cpus[ctx.rank]
    os.sched_setaffinity(0, {cpu})
    algos = open_algorithms(None, timeout=30.0, buffer_bytes=1 << 20)
    try:
        channel = algos.channel
        assert channel is not None and channel.native is not None, channel and channel.path
        t = torch.ones(1024)
        for _ in range(100):
            for name in ("shm_one_shot", "shm_two_shot"):
                algos.by_name[name].all_reduce(t.fill_(1.0), "sum", {})
                assert t[0].item() == ctx.world_size
        own = channel.layout.header_offset(0, ctx.rank)
        (hint,) = struct.unpack_from("<i", channel._mm, own + CPU_OFF)
        return {"hint": hint, "cpu": cpu, "shared_waits": channel.native.shared_waits}
    finally:
        algos.close()


@needs_module
@pytest.mark.timeout(120)
def test_waits_yield_at_once_to_a_peer_on_their_own_cpu() -> None:
    """Two ranks on one CPU: a wait finds the peer's hint equal to its own CPU (no spin); on two CPUs, never."""
    cpus = sorted(os.sched_getaffinity(0))
    same = run_ranks(_cpu_hint_rank, 2, [cpus[0], cpus[0]], timeout=90)
    assert [r["hint"] for r in same] == [cpus[0] + 1] * 2  # a rank posts 1 + the CPU of its last wait
    # one rank of the two waits in nearly every step: the other cannot post before it yields the core
    assert sum(r["shared_waits"] for r in same) >= 100, same
    if len(cpus) < 2:
        pytest.skip("one CPU here: the two-CPU half needs two")
    apart = run_ranks(_cpu_hint_rank, 2, cpus[:2], timeout=90)
    for r, cpu in zip(apart, cpus[:2], strict=True):
        assert r["hint"] in (0, cpu + 1) and r["shared_waits"] == 0, apart  # hint 0: that rank never waited
