"""SGLang on ROCm: artune reads the newest release's HIP path (``is_hip()`` true) as the release's own code runs it.

The oracle (``artune.oracles.sglang``) runs the release's ``dispatch_custom_allreduce``, the class it returns and
its ``QuickAllReduce`` on an AMD GPU stood in for; artune's reader evaluates the same files. One release here (the
newest with a HIP path) on a few seconds of probes; every release is ``python bench/engine_releases.py --engine
sglang`` (docs/results/engine-releases.md).
"""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import pytest

from artune.cli import main
from artune.errors import ReleaseUnavailable
from artune.formats.releases import fetch_release
from artune.formats.sglang.read import rocm_tables
from artune.oracles import Probe, decide_all
from artune.oracles import sglang as oracle

NEWEST = oracle.RELEASES[-1]
_DIR = "sglang/srt/distributed/device_communicators"
QUICK = f"{_DIR}/quick_all_reduce.py"
DISPATCHER = f"{_DIR}/custom_all_reduce.py"


def release(version: str = NEWEST) -> Path:
    try:
        return fetch_release("sglang", version)
    except ReleaseUnavailable as err:
        pytest.skip(f"sglang=={version} is not cached and cannot be downloaded: {err}")


def few(probes: list[Probe]) -> list[Probe]:
    """One host at 2, 3 and 8 ranks and 2 hosts at 8, both modes; on gfx942 every QuickReduce level with AITER
    off, AITER on at none and INT4, and each one-stage setting; gfx950 at the defaults: a few seconds."""
    aiter_off = ("SGLANG_USE_AITER_AR", "0")
    quick = lambda p: dict(p.env).get("ROCM_QUICK_REDUCE_QUANTIZATION")  # noqa: E731
    one_stage = lambda p: any(k != "SGLANG_USE_AITER_AR" and k.startswith("SGLANG") for k, _ in p.env)  # noqa: E731

    def wanted(p: Probe) -> bool:
        if p.arch == "gfx950":
            return p.env == (("ROCM_QUICK_REDUCE_QUANTIZATION", "NONE"),)
        if one_stage(p):
            return quick(p) == "NONE" and aiter_off not in p.env
        return aiter_off in p.env or quick(p) in ("NONE", "INT4")

    return [p for p in probes if (p.hosts, p.world_size) in ((1, 2), (1, 3), (1, 8), (2, 8)) and wanted(p)]


def test_every_switch_setting_decides_as_the_release_on_rocm() -> None:
    root = release()
    probes = few(oracle.rocm_probes(root))
    engine = oracle.engine_decisions(root, probes)
    ours = oracle.artune_decisions(root, probes)
    wrong = [(p, e, a) for p, e, a in zip(probes, engine, ours, strict=True) if e != a]
    assert not wrong, f"{len(wrong)} of {len(probes)} differ, first: {wrong[:5]}"
    # the probes reach every path SGLang has on ROCm: AITER's, its own (both modes of it), each QuickReduce level
    assert set(Counter(engine)) == {
        "aiter_ar",
        "custom_ar_v1",
        "custom_ar_v1_1stage",
        "quick_ar_fp",
        "quick_ar_int8",
        "quick_ar_int6",
        "quick_ar_int4",
        "rccl",
    }


def test_rocm_probes_stay_out_of_cudas() -> None:
    root = release()
    assert not any(p.arch.startswith("gfx") for p in oracle.probes(root, ["10.0"], [2], ()))
    # the extra probes: the ROCm ones, and CUDA's under the switches' other values (each with its setting)
    extra = oracle.extra_probes(root)
    assert {p.arch for p in extra if p.arch.startswith("gfx")} == set(oracle.ROCM_ARCHS)
    assert all(p.env for p in extra if not p.arch.startswith("gfx"))


def test_explain_names_the_platform_algorithm_kernel_and_switch(capsys: pytest.CaptureFixture[str]) -> None:
    root = release()
    args = ["explain", "--table", f"sglang:{root}", "--arch", "gfx942", "--world-size", "8", "--size", "128MiB"]
    assert main([*args, "--env", "ROCM_QUICK_REDUCE_QUANTIZATION=INT4"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("quick_ar_int4 (kernel quickreduce/int4)")
    assert "platform: rocm gfx942 (CDNA3" in out
    assert "decided by: ROCM_QUICK_REDUCE_QUANTIZATION=INT4: QuickReduce at this level" in out
    assert main([*args[:-1], "1MiB", "--env", "SGLANG_USE_1STAGE_ALLREDUCE=1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("custom_ar_v1_1stage")
    assert "decided by: SGLANG_USE_1STAGE_ALLREDUCE=True and" in out
    assert main(args) == 0  # no --env: every switch at the release's default, AITER's custom all-reduce declines
    out = capsys.readouterr().out
    assert out.startswith("rccl") and "SGLANG_USE_AITER_AR=true (default)" in out


def _mutated(root: Path, tmp_path: Path, file: str, old: str, new: str) -> Path:
    copy = tmp_path / "release"
    shutil.copytree(root, copy)
    text = (copy / file).read_text()
    assert old in text, f"{file} no longer holds {old!r}"
    (copy / file).write_text(text.replace(old, new))
    return copy


@pytest.mark.parametrize(
    ("file", "old", "new", "env"),
    [
        # QuickReduce's fp16 row at 8 ranks (bf16 is cast to it by default): FP never (2 GiB), where it took the
        # sizes above SGLang's own 16 MiB custom all-reduce
        (
            QUICK,
            "(torch.float16, 8): [16 * MB,",
            "(torch.float16, 8): [2048 * MB,",
            {"SGLANG_USE_AITER_AR": "0", "ROCM_QUICK_REDUCE_QUANTIZATION": "FP"},
        ),
        # AITER's custom all-reduce off by default: SGLang's own takes its place
        (
            DISPATCHER,
            '"SGLANG_USE_AITER_AR", default="true"',
            '"SGLANG_USE_AITER_AR", default="false"',
            {"ROCM_QUICK_REDUCE_QUANTIZATION": "INT4"},
        ),
    ],
)
def test_a_changed_release_is_followed_on_rocm(
    tmp_path: Path, file: str, old: str, new: str, env: dict[str, str]
) -> None:
    root = release()
    changed = _mutated(root, tmp_path, file, old, new)
    setting = tuple(sorted(env.items()))
    probes = [p for p in few(oracle.rocm_probes(changed)) if p.env == setting and p.arch == "gfx942"]
    assert probes
    before = oracle.engine_decisions(root, probes)
    engine = oracle.engine_decisions(changed, probes)
    assert engine != before  # the change reaches what SGLang runs
    reading = rocm_tables(str(changed), env)
    assert decide_all(reading.tables, probes, reading.findings) == engine


def test_what_the_reader_cannot_follow_on_rocm_is_a_caveat_on_the_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a loop the evaluator does not model, which SGLang runs as the if it replaces (its body returns)
    old = 'if get_bool_env_var("SGLANG_USE_AITER_AR", default="true"):'
    changed = _mutated(release(), tmp_path, DISPATCHER, old, old.replace("if ", "while ", 1))
    probes = [p for p in few(oracle.rocm_probes(changed)) if p.env == (("ROCM_QUICK_REDUCE_QUANTIZATION", "NONE"),)]
    assert "aiter_ar" in oracle.engine_decisions(changed, probes)  # SGLang still builds AITER's
    table = rocm_tables(str(changed), {}).tables.resolve("gfx942")
    (caveat,) = {c for c in table.caveats if c.function == "dispatch_custom_allreduce" and c.kind == "unevaluated"}
    # the changed function is no verified release's either
    assert any(c.function == "dispatch_custom_allreduce" and c.kind == "unfamiliar" for c in table.caveats)
    assert f"{DISPATCHER}:" in caveat.where and "While" in caveat.detail
    args = ["explain", "--table", f"sglang:{changed}", "--arch", "gfx942", "--world-size", "8", "--size", "1MiB"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "unverified" in out.splitlines()[0] and "dispatch_custom_allreduce" in out
