"""AMD all-reduce evidence: rccl-tests output as its own tool prints it, and what it prints that nccl-tests
does not."""

from __future__ import annotations

from importlib.resources import files

import pytest

from artune.errors import EvidenceError
from artune.evidence import read_text

RCCL_TESTS = files("artune.costmodel").joinpath("data", "rccl-tests-mi300x-ws8.txt").read_text(encoding="utf-8")


def test_rccl_tests_output_is_rccl_on_an_amd_node() -> None:
    sweep = read_text(RCCL_TESTS, "mi300x.txt")
    assert sweep.format == "nccl-tests" and sweep.benchmark == "rccl-tests all_reduce_perf (version develop:83d38d9)"
    assert (sweep.world_size, sweep.mode, sweep.dtype, sweep.multicast) == (8, "eager", "float32", False)
    assert [c.kernel for c in sweep.columns] == ["rccl", "rccl/in_place"]
    assert sweep.sizes == (8388608,) and sweep.times == ((91.10, 94.94),)
    # "iters: 20", not the warm-up's 5
    assert sweep.timing == "20 calls launched back to back, wall clock after a device sync, per call"


def test_rccl_tests_in_place_alone_is_read_as_in_place() -> None:
    # rccl-tests -O 0 prints only the in-place group of columns (src/common.cu, enable_out_of_place)
    lines = RCCL_TESTS.splitlines()
    header = next(i for i, line in enumerate(lines) if " size " in line)
    lines[header - 1] = "#" + " " * 60 + "in-place"
    lines[header] = "#       size         count      type   redop    root     time   algbw   busbw #wrong"
    lines[-1] = "     8388608       2097152     float     sum      -1    94.94   88.36  154.63      0"
    sweep = read_text("\n".join(lines), "in-place.txt")
    assert [c.name for c in sweep.columns] == ["in-place"] and sweep.times == ((94.94,),)


def test_rccl_tests_cputime_is_refused() -> None:
    # rccl-tests -C 1 reports the host's CPU time in place of the collective's
    text = RCCL_TESTS.replace("root     time   algbw", "root  cputime   algbw").replace(
        "#wrong     time   algbw", "#wrong  cputime   algbw"
    )
    with pytest.raises(EvidenceError, match=r"cputime \(rccl-tests -C 1"):
        read_text(text, "cputime.txt")


def test_an_rccl_tests_graph_run_is_a_hip_graph() -> None:
    text = RCCL_TESTS.replace("graph: 0", "graph: 10")
    sweep = read_text(text, "graph.txt")
    assert sweep.mode == "graph" and sweep.timing.startswith("20 calls captured in a HIP graph, launched 10 times")
