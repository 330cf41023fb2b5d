"""The evidence readers on benchmark output in each format (tests/fixtures/evidence, README names the sources)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from artune.errors import ArtuneError, EvidenceError
from artune.evidence import detect, read_evidence, read_text

FIXTURES = Path(__file__).parent / "fixtures" / "evidence"
SWEEPS = Path(__file__).parents[1] / "src" / "artune" / "costmodel" / "data"  # the published vLLM sweeps
KiB, MiB = 1 << 10, 1 << 20


def test_vllm_text_reads_every_column_with_its_kernel_and_sizes_from_the_shape() -> None:
    sweep = read_evidence(FIXTURES / "vllm" / "ds4-tp4.txt")
    assert (sweep.format, sweep.world_size, sweep.mode, sweep.dtype) == ("vllm-text", 4, "graph", "bfloat16")
    assert "CUDA graph of 10 back-to-back" in sweep.timing
    kernels = {c.name: c.kernel for c in sweep.columns}
    assert kernels == {
        "ca_1stage": "custom_ar/1stage",
        "ca_2stage": "custom_ar/2stage",
        "pynccl": "nccl",
        "pynccl-symm": "nccl_symm",
        "symm_mem_multimem": "symm_mem/multimem",
        "symm_mem_two_shot": "symm_mem/two_shot",
    }
    forced = {c.name: c.forced for c in sweep.columns}
    assert "VLLM_CUSTOM_ALLREDUCE_ALGO=1stage" in forced["ca_1stage"]
    assert "VLLM_CUSTOM_ALLREDUCE_ALGO=2stage" in forced["ca_2stage"]
    # (32, 8192) bf16 .. (256, 8192): 512 KiB .. 4 MiB, from the shape, not the rounded "MB" column
    assert sweep.sizes == (512 * KiB, MiB, 1536 * KiB, 2 * MiB, 3 * MiB, 4 * MiB)
    one, symm = sweep.column("custom_ar/1stage"), sweep.column("nccl_symm")
    assert one is not None and symm is not None
    assert sweep.time(512 * KiB, one) == pytest.approx(10.0)  # 0.010 ms
    assert sweep.time(3 * MiB, symm) == pytest.approx(23.0)
    multimem = sweep.column("symm_mem/multimem")
    assert multimem is not None and sweep.time(4 * MiB, multimem) is None  # N/A (cut off in the source)
    assert sweep.fastest(2 * MiB) == (symm, pytest.approx(21.0))
    assert sweep.resolution_us == 0.5


def test_vllm_text_and_json_of_one_sweep_agree() -> None:
    text = read_evidence(FIXTURES / "vllm" / "ds2c-sm103-ws2.txt")
    data = read_evidence(SWEEPS / "ds2c-sm103-ws2.json")
    assert (text.format, data.format) == ("vllm-text", "vllm-json")
    assert text.sizes == data.sizes and text.sizes[0] == 16 * KiB and text.sizes[-1] == 128 * MiB
    assert [c.name for c in text.columns] == [c.name for c in data.columns]
    for a, b in zip(text.times, data.times, strict=True):
        assert a == pytest.approx(b)
    assert "replayed 50 times" in data.timing  # the JSON names its trials


def test_vllm_json_sizes_follow_hidden_size_and_dtype(tmp_path: Path) -> None:
    data = json.loads((SWEEPS / "ds2b-sm100-ws2.json").read_text())
    data.update(hidden_size=4096, dtype="torch.float32")
    path = tmp_path / "b.json"
    path.write_text(json.dumps(data))
    sweep = read_evidence(path)
    assert sweep.dtype == "float32" and sweep.sizes[0] == 32 * 4096 * 4


def test_vllm_size_only_column_is_snapped_to_whole_rows() -> None:
    text = (SWEEPS / "ds3a-h100-tp2.txt").read_text()
    lines = [line[20:] if line.startswith(("(", "Tensor Shape")) else line for line in text.splitlines()]
    sweep = read_text("\n".join(lines), "size-only")
    assert sweep.sizes == (512 * KiB, MiB, 1536 * KiB, 2 * MiB)


def test_nccl_tests_reads_both_placements_mode_and_world_size() -> None:
    sweep = read_evidence(FIXTURES / "nccl-tests" / "ds12a-h100-nvls-2gpu.txt")
    assert (sweep.format, sweep.world_size, sweep.mode, sweep.dtype) == ("nccl-tests", 2, "graph", "float32")
    assert [(c.name, c.kernel) for c in sweep.columns] == [("out-of-place", "nccl"), ("in-place", "nccl/in_place")]
    assert sweep.sizes == (128, 256, 512)
    assert sweep.times[0] == pytest.approx((5.56, 5.82))
    assert "CUDA graph" in sweep.timing
    rack = read_evidence(FIXTURES / "nccl-tests" / "ds12f-gb200-nvl72.txt")
    assert (rack.world_size, rack.mode) == (72, "eager")  # one Rank line per rank; graph: 0
    assert rack.times[-1] == pytest.approx((20299.0, 20006.0))


def test_nccl_tests_with_mpi_prefixes_and_old_header() -> None:
    text = (FIXTURES / "nccl-tests" / "ds12a-h100-nvls-2gpu.txt").read_text()
    prefixed = "\n".join(f"[1,0]<stdout>:{line}" for line in text.splitlines())
    assert read_text(prefixed).times == read_evidence(FIXTURES / "nccl-tests" / "ds12a-h100-nvls-2gpu.txt").times
    old = text.replace("    root", "").replace("     -1", "").replace("#wrong", " error")
    assert read_text(old).sizes == (128, 256, 512)


def test_sglang_markdown_picks_a_mode_and_maps_its_columns() -> None:
    path = FIXTURES / "sglang" / "ds15-pr10571-torch-symm-mem.md"
    graph = read_evidence(path, world_size=8)
    assert (graph.format, graph.mode, graph.world_size) == ("sglang-markdown", "graph", 8)
    assert [(c.name, c.kernel) for c in graph.columns] == [
        ("symm mem graph time", "sglang/torch_symm_mem"),
        ("pynccl graph time", "nccl"),
    ]
    assert graph.sizes == (2 * KiB, 4 * KiB, 8 * KiB)
    assert math.isnan(graph.times[2][0])  # cut off in the source
    eager = read_evidence(path, world_size=8, mode="eager")
    assert [c.name for c in eager.columns] == ["torch eager time", "symm mem eager time"]
    assert eager.times[0] == pytest.approx((48.6752, 42.6112))
    with pytest.raises(EvidenceError, match="does not print its world size"):
        read_evidence(path)


def test_sglang_jit_table() -> None:
    sweep = read_evidence(FIXTURES / "sglang" / "invented-jit-ws4.txt", world_size=4)
    assert sweep.format == "sglang-jit" and [c.name for c in sweep.columns] == ["NCCL", "AOT", "JIT", "FI"]
    assert sweep.sizes[:6] == (4 * KiB, 16 * KiB, 64 * KiB, 128 * KiB, 192 * KiB, 256 * KiB)
    fi = sweep.column("flashinfer/trtllm")
    assert fi is not None and sweep.time(256 * KiB, fi) is None  # n/a
    assert sweep.times[-1][:3] == pytest.approx((55.0, 63.0, 45.8))


def test_trtllm_csv_keeps_plain_all_reduce_rows_and_needs_the_mode() -> None:
    path = FIXTURES / "trtllm" / "invented-ws8.csv"
    with pytest.raises(EvidenceError, match="--enable_cudagraph"):
        read_evidence(path)
    sweep = read_evidence(path, mode="graph")
    assert (sweep.world_size, sweep.format) == (8, "trtllm-csv")
    assert [(c.name, c.kernel) for c in sweep.columns] == [
        ("NCCL", "nccl"),
        ("NCCL_SYMMETRIC", "nccl_symm"),
        ("ONESHOT", "trtllm/oneshot"),
        ("TWOSHOT", "trtllm/twoshot"),
    ]
    assert sweep.sizes[0] == 512 and sweep.times[0][0] == pytest.approx(9.8)  # NONE, not RESIDUAL_RMS_NORM
    assert math.isnan(sweep.times[0][3])  # TWOSHOT skipped below tp_size tokens


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("hello\nworld\n", "not the output of a benchmark artune reads"),
        ('{"results": {}}', "not the output of a benchmark"),
        (
            "World Size: 2, Data Type: torch.bfloat16, Hidden Size: 8192\n"
            "Tensor Shape        Tensor Size    ca_3stage           Best (Speedup vs PyNccl)\n"
            "(32, 8192)          0.50 MB        0.007               ca_3stage (N/A)\n",
            "unknown column ca_3stage",
        ),
        (
            "World Size: 2, Data Type: torch.bfloat16, Hidden Size: 8192\n"
            "Tensor Shape        Tensor Size    pynccl              Best (Speedup vs PyNccl)\n"
            "(32, 8192)          0.50 MB        fast                pynccl (1.00x)\n",
            "neither a time in ms nor N/A",
        ),
        ("| msg_size | quantum graph time |\n|---|---|\n| 2.0 KiB | 1.0 |\n", "unknown column 'quantum graph time'"),
        ("world_size,dtype,size,strategy,time (us)\n2,bfloat16,512,NCCL,3.0\n", "lacks num_tokens"),
    ],
)
def test_malformed_or_unknown_output_is_a_clear_error(text: str, message: str, tmp_path: Path) -> None:
    path = tmp_path / "evidence.txt"
    path.write_text(text)
    with pytest.raises(EvidenceError, match=message) as err:
        read_evidence(path, world_size=2, mode="graph")
    assert isinstance(err.value, ArtuneError) and str(path) in str(err.value)


def test_unreadable_file_and_disagreeing_world_size(tmp_path: Path) -> None:
    with pytest.raises(EvidenceError, match="cannot read"):
        read_evidence(tmp_path / "missing.json")
    (tmp_path / "bin").write_bytes(b"\xff\xfe\x00\x81")
    with pytest.raises(EvidenceError, match="not a text file"):
        read_evidence(tmp_path / "bin")
    with pytest.raises(EvidenceError, match="world size 2, not 4"):
        read_evidence(SWEEPS / "ds2b-sm100-ws2.json", world_size=4)


def test_detect_names_each_format() -> None:
    found = {detect(p.read_text()) for p in FIXTURES.rglob("*") if p.is_file() and p.name != "README.md"}
    assert found == {"vllm-text", "vllm-json", "nccl-tests", "sglang-markdown", "sglang-jit", "trtllm-csv"}


def test_noise_is_the_sweeps_own_non_monotonicity_or_print_precision() -> None:
    flat = read_evidence(FIXTURES / "vllm" / "invented-sm103-ws6.json")
    assert flat.noise == 0.0  # every column rises with size; the JSON has full precision
    ds2c = read_evidence(SWEEPS / "ds2c-sm103-ws2.json")
    # pynccl: 0.021 -> 0.012 -> 0.011 ms over the first sizes, 39 adjacent pairs in all
    assert ds2c.noise == pytest.approx((0.021 / 0.012 - 1 + 0.012 / 0.011 - 1) / 39)


def test_the_cost_model_reads_the_same_files() -> None:
    from artune.costmodel.published import from_evidence, sweep

    ds3a = from_evidence(read_evidence(SWEEPS / "ds3a-h100-tp2.txt"), "DS3a", "h100-sxm")
    published = sweep("DS3a")
    assert (ds3a.kernels, ds3a.sizes, ds3a.world_size, ds3a.mode) == (
        published.kernels,
        published.sizes,
        published.world_size,
        published.mode,
    )
    for mine, theirs in zip(ds3a.times, published.times, strict=True):
        assert mine == pytest.approx(theirs, nan_ok=True)
    nccl = from_evidence(read_evidence(FIXTURES / "nccl-tests" / "ds12a-h100-nvls-2gpu.txt"), "u", "h100-sxm")
    assert nccl.kernels == ("library/nccl",)  # the in-place twin is left out
    data = json.loads((SWEEPS / "ds2b-sm100-ws2.json").read_text())
    for entry in data["results"].values():
        entry["timings"] = {"pynccl-symm": entry["timings"]["pynccl"]}
    with pytest.raises(ValueError, match="no column the cost model has a form for"):
        from_evidence(read_text(json.dumps(data)), "u", "b200")


def test_calibrate_takes_sweep_files() -> None:
    import sys

    sys.path.insert(0, str(Path(__file__).parents[1] / "bench"))
    from calibrate_gpu import extra_sweeps

    (added,) = extra_sweeps([f"{FIXTURES / 'vllm' / 'invented-sm103-ws6.json'}@b300"])
    assert (added.id, added.preset, added.world_size, len(added.sizes)) == ("user1", "b300", 6, 14)
    assert added.kernels[:2] == ("one_shot/custom", "two_shot/custom")
    with pytest.raises(SystemExit, match="FILE@PRESET"):
        extra_sweeps([str(FIXTURES / "vllm" / "invented-sm103-ws6.json")])
