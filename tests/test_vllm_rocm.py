"""vLLM on ROCm read by its own code: QuickReduce, AITER's and vLLM's custom all-reduce and RCCL, in the order
``CudaCommunicator.all_reduce`` asks them on an AMD GPU, under the release's own switches.

The releases are the cached wheels tests/test_vllm_eval.py downloads; a mutated copy keeps its readings in the
test's own folder."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from artune.formats.vllm.read import read_vllm
from test_vllm_eval import release

MiB = 1 << 20
QR = "vllm/distributed/device_communicators/quick_all_reduce.py"


def _bands(version_or_root: str | Path, ws: int, **settings: str) -> list[tuple[int | None, tuple[str, ...]]]:
    root = version_or_root if isinstance(version_or_root, Path) else release(version_or_root)
    table = read_vllm(str(root), settings).tables.resolve("gfx942")
    assert table.platform.kind == "rocm" and table.platform.arch == "gfx942"
    plan = table.plan(ws, "eager", 1, None, "host")
    assert plan is not None and plan.fallback == "rccl"
    return [(b.upto, b.candidates) for b in plan.bands]


def test_quick_reduce_runs_at_its_level_from_the_fp16_minimum_by_default() -> None:
    # QuickReduce is off by default (NONE); vLLM's custom all-reduce below its 8 MiB buffer, then RCCL
    assert _bands("0.34.0", 8) == [(8 * MiB - 1, ("custom_ar",))]
    # INT8 at 4 ranks: bf16 is cast to fp16 by default, so the fp16 row decides (16 MB), not bf16's (64 MB)
    assert _bands("0.34.0", 4, VLLM_ROCM_QUICK_REDUCE_QUANTIZATION="INT8") == [
        (8 * MiB - 1, ("custom_ar",)),
        (16 * MiB - 1, ("rccl",)),
        (2048 * MiB, ("quick_ar_int8",)),
    ]
    # without the cast the bf16 row holds: 64 MB
    cast_off = {"VLLM_ROCM_QUICK_REDUCE_QUANTIZATION": "INT8", "VLLM_ROCM_QUICK_REDUCE_CAST_BF16_TO_FP16": "0"}
    assert _bands("0.34.0", 4, **cast_off)[-1] == (2048 * MiB, ("quick_ar_int8",))
    assert _bands("0.34.0", 4, **cast_off)[-2] == (64 * MiB - 1, ("rccl",))
    # the environment caps QuickReduce's maximum
    cap = {"VLLM_ROCM_QUICK_REDUCE_QUANTIZATION": "FP", "VLLM_ROCM_QUICK_REDUCE_MAX_SIZE_BYTES_MB": "4"}
    assert _bands("0.34.0", 2, **cap) == [
        (MiB - 1, ("custom_ar",)),
        (4 * MiB, ("quick_ar_fp", "custom_ar")),
        (8 * MiB - 1, ("custom_ar",)),
    ]
    # INT3 only at two ranks from the release that restricted it; 0.10.0 has no INT3 level at all
    assert ("quick_ar_int3",) in {c for _u, c in _bands("0.34.0", 2, VLLM_ROCM_QUICK_REDUCE_QUANTIZATION="INT3")}
    assert not any("quick_ar_int3" in c for _u, c in _bands("0.34.0", 4, VLLM_ROCM_QUICK_REDUCE_QUANTIZATION="INT3"))
    assert not any("quick_ar_int3" in c for _u, c in _bands("0.10.0", 2, VLLM_ROCM_QUICK_REDUCE_QUANTIZATION="INT3"))


def test_aiter_takes_custom_all_reduces_place_when_both_switches_are_on() -> None:
    on = {"VLLM_ROCM_USE_AITER": "1", "VLLM_ROCM_QUICK_REDUCE_QUANTIZATION": "FP"}
    assert _bands("0.34.0", 8, **on) == [
        (16 * MiB - 1, ("aiter_ar",)),
        (64 * MiB, ("quick_ar_fp", "aiter_ar")),
        (2048 * MiB, ("quick_ar_fp",)),
    ]
    off = {**on, "VLLM_ROCM_USE_AITER_CUSTOM_AR": "0"}
    assert all("aiter_ar" not in c for _u, c in _bands("0.34.0", 8, **off))


def test_the_capability_torch_reports_stands_for_the_gfx_arch_and_cuda_is_unchanged() -> None:
    imported = read_vllm(str(release("0.34.0")))
    assert imported.tables.resolve("9.4").platform.kind == "cuda"  # a number is a CUDA capability in a CUDA set
    assert imported.tables.resolve("gfx942:sramecc+:xnack-").platform.arch == "gfx942"
    assert imported.tables.resolve("10.0").platform.kind == "cuda"


def test_a_changed_minimum_in_the_release_moves_the_band(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARTUNE_READINGS_DIR", str(tmp_path / "readings"))
    root = tmp_path / "vllm"
    shutil.copytree(release("0.34.0") / "vllm", root / "vllm")
    path = root / QR
    text = path.read_text()
    assert "(torch.float16, 8): [16 * MB," in text
    path.write_text(text.replace("(torch.float16, 8): [16 * MB,", "(torch.float16, 8): [4 * MB,"))
    assert _bands(root, 8, VLLM_ROCM_QUICK_REDUCE_QUANTIZATION="FP")[0] == (4 * MiB - 1, ("custom_ar",))


@pytest.mark.parametrize("version", ["0.20.0", "0.34.0"])
def test_the_release_own_code_agrees_on_every_rocm_probe(version: str) -> None:
    from artune.oracles import RAISES
    from artune.oracles import vllm as oracle

    root = release(version)
    probes = oracle.rocm_probes(root)
    levels = {dict(p.env)["VLLM_ROCM_QUICK_REDUCE_QUANTIZATION"] for p in probes}
    assert levels == {"FP", "INT8", "INT6", "INT4", "INT3", "NONE"}
    assert {dict(p.env).get("VLLM_ROCM_USE_AITER") for p in probes} == {"1", None}
    theirs = oracle.engine_decisions(root, probes)
    assert oracle.artune_decisions(root, probes) == theirs
    ran = set(theirs)
    assert {"rccl", "custom_ar", "quick_ar_fp", "quick_ar_int4"} <= ran
    # 0.20.0's envs.py refuses INT3 at start-up (V110); 0.34.0 runs it at two ranks, and AITER's custom all-reduce
    assert (RAISES in ran) == (version == "0.20.0")
    assert ("quick_ar_int3" in ran) == ("aiter_ar" in ran) == (version == "0.34.0")


def test_explain_names_the_platform_the_algorithm_the_kernel_and_the_switch(capsys) -> None:
    from artune.cli import main

    release("0.34.0")
    base = ["explain", "--table", "vllm==0.34.0", "--arch", "gfx942", "--world-size", "8"]
    assert main([*base, "--size", "1MiB"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("custom_ar (kernel cross_device_reduce_2stage)")
    assert "platform: rocm gfx942 (CDNA3; torch reports capability 9.4" in out
    assert "decided by: VLLM_ROCM_USE_AITER=False (default)" in out
    assert main([*base, "--size", "4MiB", "--env", "VLLM_ROCM_QUICK_REDUCE_QUANTIZATION=INT4"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("quick_ar_int4 (kernel quickreduce/int4)")
    assert "decided by: VLLM_ROCM_QUICK_REDUCE_QUANTIZATION=INT4: QuickReduce at this level" in out
    # the same size under the default: QuickReduce is off, and 1 MiB under INT4 is below the float16 row's 2 MB
    assert main([*base, "--size", "1MiB", "--env", "VLLM_ROCM_QUICK_REDUCE_QUANTIZATION=INT4"]) == 0
    assert capsys.readouterr().out.startswith("custom_ar")
    # a level the release's envs.py refuses: vLLM does not start, and explain says so instead of answering
    assert main([*base, "--size", "1MiB", "--env", "VLLM_ROCM_QUICK_REDUCE_QUANTIZATION=INT5"]) == 2
    assert "vLLM raises at start-up on ROCm at world sizes 2, 4, 8" in capsys.readouterr().err
    # custom all-reduce (and QuickReduce with it) is the MI300 series' only: MI250 (gfx90a) runs RCCL
    assert main([*base[:4], "gfx90a", *base[5:], "--size", "1MiB"]) == 0
    assert capsys.readouterr().out.startswith("rccl")
    assert main([*base, "--size", "1MiB", "--env", "VLLM_ROCM_QUICK_REDUCE_QUANTIZATION"]) == 2
    assert "give VAR=VALUE" in capsys.readouterr().err
    assert main([*base[:2], "reference:vllm", *base[3:], "--size", "1MiB", "--env", "A=1"]) == 2
    assert "--env sets a vLLM release's switches" in capsys.readouterr().err


def test_quick_reduce_findings_name_the_row(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from artune.formats.vllm.read import rocm_tables

    def codes(root: Path, **settings: str) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for f in rocm_tables(str(root), settings).findings:
            out.setdefault(f.code, []).append(f"{f.source} {f.message}")
        return out

    newest = codes(release("0.34.0"))
    assert list(newest) == ["V111"]
    assert newest["V111"][0].startswith(f"vllm==0.34.0/{QR}:57 _QR_MIN_SIZE row (bfloat16, 8): QuickReduce at INT8")
    capped = codes(release("0.34.0"), VLLM_ROCM_QUICK_REDUCE_MAX_SIZE_BYTES_MB="4")["V114"]
    assert any(line.startswith(f"vllm==0.34.0/{QR}:53 ") and "row (float16, 4) at INT8" in line for line in capped)
    raised = codes(release("0.20.0"), VLLM_ROCM_QUICK_REDUCE_QUANTIZATION="INT3")["V110"]
    assert raised[0].startswith("vllm==0.20.0/vllm/envs.py:") and "at world sizes 2, 4, 8" in raised[0]
    # a pull request that copies the fp16 row into bf16's at 2 ranks, and drops bf16's row at 4
    monkeypatch.setenv("ARTUNE_READINGS_DIR", str(tmp_path / "readings"))
    root = tmp_path / "vllm"
    shutil.copytree(release("0.34.0") / "vllm", root / "vllm")
    path = root / QR
    text = path.read_text()
    for old, new in (
        (
            "(torch.bfloat16, 2): [2 * MB, 8 * MB, 8 * MB, 8 * MB, 8 * MB],",
            "(torch.bfloat16, 2): [1 * MB, 2 * MB, 2 * MB, 1 * MB, 1 * MB],",
        ),
        ("(torch.bfloat16, 4): [8 * MB, 64 * MB, 64 * MB, 16 * MB, 16 * MB],\n", ""),
    ):
        assert old in text
        text = text.replace(old, new)
    path.write_text(text)
    mutated = codes(root)
    assert "row (bfloat16, 2) equals the float16 row" in mutated["V113"][0]
    assert "no row for bfloat16 at world size 4" in mutated["V112"][0]
