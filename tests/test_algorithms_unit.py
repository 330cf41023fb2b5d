"""In-process checks of the algorithm package's pieces (no ranks spawned)."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys

import pytest
import torch

from artune.algorithms.base import REDUCE_OPS
from artune.algorithms.shm import SUPPORTED_DTYPES, shm_unavailable
from artune.algorithms.shm.algorithms import _PLANS, _chunk_elements, _ShmAlgorithm
from artune.algorithms.shm.channel import (
    _HDR,
    ALGORITHM_CODES,
    DTYPE_CODES,
    HDR_LEN,
    algorithm_code,
    dtype_code,
    op_code,
)
from artune.algorithms.shm.segment import (
    HEADER_BYTES,
    Layout,
    _choose_layout,
    _too_small_message,
    process_start_time,
)
from artune.algorithms.torch_dist import SUPPORTED
from artune.catalog import SPECS
from artune.errors import CommunicatorClosed, ShmUnavailable

pytestmark = pytest.mark.timeout(30)


def test_layout_slots_do_not_overlap_and_are_aligned() -> None:
    for world in (1, 2, 3, 8):
        for capacity in (64, 4096, 65536 + 64):
            layout = Layout(world, capacity)
            spans = []
            for buf in (0, 1):
                for rank in range(world):
                    hdr, data = layout.header_offset(buf, rank), layout.data_offset(buf, rank)
                    assert data - hdr == HEADER_BYTES >= HDR_LEN
                    assert data % 128 == 0
                    spans.append((hdr, data + capacity))
            spans.sort()
            assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))
            assert spans[-1][1] <= layout.total_bytes


def test_header_codes_are_distinct_and_stable() -> None:
    assert len(set(DTYPE_CODES.values())) == len(DTYPE_CODES)
    assert set(ALGORITHM_CODES) == set(SPECS)
    assert len(set(ALGORITHM_CODES.values())) == len(ALGORITHM_CODES)
    # names outside the tables still get a code, unlike any table code and unlike each other
    assert dtype_code(torch.complex32) not in DTYPE_CODES.values()
    assert dtype_code(torch.complex32) != dtype_code(torch.complex64)
    assert op_code("product") not in (op_code(o) for o in REDUCE_OPS)
    assert algorithm_code("not-in-catalog") not in ALGORITHM_CODES.values()
    assert _HDR.size == HDR_LEN <= HEADER_BYTES


def test_codes_outside_the_tables_are_the_same_in_every_process() -> None:
    """Ranks compare header codes, so a name outside the tables must get the same code in every process: a
    code from Python's salted ``hash()`` would differ in a process with another hash seed."""
    names = "torch.complex32, 'product', 'not-in-catalog'"
    script = (
        "import torch\n"
        "from artune.algorithms.shm.channel import algorithm_code, dtype_code, op_code\n"
        f"d, o, a = {names}\n"
        "print(dtype_code(d), op_code(o), algorithm_code(a))\n"
    )
    here = f"{dtype_code(torch.complex32)} {op_code('product')} {algorithm_code('not-in-catalog')}"
    found = [
        subprocess.run(
            [sys.executable, "-c", script],
            env={**os.environ, "PYTHONHASHSEED": seed},  # two seeds: at least one is not this process's
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        for seed in ("1", "2")
    ]
    assert found == [here, here]


def test_shm_availability_is_by_dtype_and_op_only() -> None:
    for dtype in SUPPORTED_DTYPES:
        for op in REDUCE_OPS:
            assert shm_unavailable(dtype, op) is None
            assert (dtype, op) in _PLANS
    for dtype in (torch.bool, torch.complex64, torch.float8_e4m3fn):
        reason = shm_unavailable(dtype, "sum")
        assert reason and str(dtype) in reason
    assert "op 'avg'" in (shm_unavailable(torch.float32, "avg") or "")
    for backend, dtypes in SUPPORTED.items():
        assert torch.int16 not in dtypes, backend  # gloo raises "Invalid scalar type"


def test_chunk_bytes_parameter() -> None:
    assert _chunk_elements(4096, 65536, 4) == 1024
    assert _chunk_elements(1000, 65536, 8) == 125
    assert _chunk_elements(3, 65536, 8) == 1  # at least one element
    assert _chunk_elements("16KiB", 65536, 2) == 8192
    for bad in (0, -1, 65537, True, "1GiB"):
        with pytest.raises(ValueError, match="chunk_bytes"):
            _chunk_elements(bad, 65536, 4)
    assert _ShmAlgorithm.checks_calls is True
    values = _ShmAlgorithm.tunables["chunk_bytes"]
    assert values == tuple(sorted(values)) and all(isinstance(v, int) and v > 0 for v in values)


def test_layout_choice_and_too_small_message(monkeypatch: pytest.MonkeyPatch) -> None:
    from artune.algorithms.shm import segment

    monkeypatch.setattr(segment, "_shm_free_bytes", lambda: 10 << 20)
    with pytest.raises(ShmUnavailable, match="only 10485760 bytes") as err:
        _choose_layout(2, 8 << 20)
    assert "--shm-size" in str(err.value) and "smaller buffer" in str(err.value)
    # unasked, the default shrinks to fit half of the free space
    layout = _choose_layout(2, None)
    assert layout.total_bytes <= 5 << 20 and layout.capacity >= 64 << 10
    assert _choose_layout(2, 100).capacity == 128  # rounded up to 64 bytes
    with pytest.raises(ShmUnavailable, match="too small"):
        _choose_layout(2, 8)
    assert "needs 5 bytes" in _too_small_message(5, 1, 64)


def test_process_start_time_sees_this_process_and_not_a_missing_pid() -> None:
    assert process_start_time(os.getpid()) is not None
    assert process_start_time(2**22 + 12345) is None


def test_process_group_algorithm_name_and_availability(monkeypatch: pytest.MonkeyPatch) -> None:
    from artune.algorithms import torch_dist

    monkeypatch.setattr(torch_dist.dist, "get_backend", lambda group=None: "cpu:gloo,cuda:nccl")
    assert torch_dist.backend_name() == "gloo"
    monkeypatch.setattr(torch_dist.dist, "get_backend", lambda group=None: "gloo")
    algorithm = torch_dist.ProcessGroupAlgorithm(None, timeout=5.0)
    assert algorithm.name == "gloo" and algorithm.name in SPECS and not algorithm.checks_calls
    assert algorithm.unavailable(torch.bfloat16, "max") is None
    assert "int16" in (algorithm.unavailable(torch.int16, "sum") or "")
    assert "avg" in (algorithm.unavailable(torch.float32, "avg") or "")
    algorithm.close()
    with pytest.raises(CommunicatorClosed, match="closed"):
        algorithm.all_reduce(torch.ones(1), "sum", {})


def test_backend_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch.distributed as dist

    from artune.algorithms.torch_dist import backend_devices, backend_name

    for backend, devices, name in (
        ("gloo", {"cpu", "cuda"}, "gloo"),
        ("nccl", {"cuda"}, "nccl"),
        ("cpu:gloo,cuda:nccl", {"cpu", "cuda"}, "gloo"),
        ("ucc", None, "ucc"),
    ):
        monkeypatch.setattr(dist, "get_backend", lambda group=None, b=backend: b)
        assert backend_devices() == (frozenset(devices) if devices else None), backend
        assert backend_name() == name
