"""``trtllm:PATH``: TensorRT-LLM's lookup-table header read, checked, exported, and its generator's CSV in and out.

The fixtures are revisions of the header kept with their commits named
(``tests/fixtures/trtllm-*``, and ``tests/fixtures/trtllm-revisions`` for the
ones whose shape differs); the compiled header's own answers are in
``test_oracle_trtllm.py``.
"""

from __future__ import annotations

import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from artune.cli import main
from artune.errors import TableError
from artune.formats.trtllm.generator import COLUMNS, PREFERENCE, read_csv, write_csv
from artune.formats.trtllm.read import HEADER, read_trtllm
from artune.formats.trtllm.write import HIDDEN_ROWS, PLANES, TOKEN_COLUMNS, TP_ROWS, export_trtllm
from artune.measure.records import Candidate, Measurement, ShapeMeasurement
from artune.table.decide import decide
from artune.table.io import dumps_table, loads_table
from artune.table.types import Table, TokenShape
from artune.tune.shapes import derive_shape_table

FIXTURES = Path(__file__).parent / "fixtures"
OLD, NEW = FIXTURES / "trtllm-005b299", FIXTURES / "trtllm-3d56e29"
REVISIONS = FIXTURES / "trtllm-revisions" / "revisions.tar.xz"
SM_LINE = "    auto sm_version = tensorrt_llm::common::getSMVersion();"


def revision(tmp_path: Path, name: str) -> Path:
    """One revision of ``revisions.tar.xz`` unpacked (a folder laid out like a checkout)."""
    with tarfile.open(REVISIONS) as archive:
        archive.extractall(tmp_path, members=[m for m in archive.getmembers() if m.name.startswith(f"{name}/")])
    return tmp_path / name


def copy(tmp_path: Path, source: Path = NEW) -> Path:
    target = tmp_path / "checkout"
    shutil.copytree(source, target)
    return target


def edit(root: Path, old: str, new: str) -> None:
    path = root / HEADER
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


def test_both_revisions_read_with_their_own_fallback_and_cap() -> None:
    old, new = read_trtllm(str(OLD)), read_trtllm(str(NEW))
    assert set(old.tables.tables) == set(new.tables.tables) == {"9.0", "10.0"}
    t_old, t_new = old.tables.tables["9.0"], new.tables.tables["9.0"]
    assert t_old.plans == () and t_old.by_shape

    def outside(table: Table) -> set[str]:  # what TP 16 runs: past the table's rows
        return {a for p in table.shape_plans if p.world_size == 16 for a in p.algorithms}

    assert outside(t_old) == {"nccl_symmetric"} and outside(t_new) == {"nccl"}
    assert t_old.caps == ((2, 16_000_000), (None, 8_000_000)) and t_new.caps == ((None, 64 << 20),)
    # the fused ops that share a plane in one plan
    assert any(set(p.fusions) >= {"RESIDUAL_RMS_NORM", "RESIDUAL_RMS_NORM_OUT_FP32"} for p in t_new.shape_plans)
    # the rows as the truncated log2 reads them: TP 4..7, hidden 4096..8191, hidden 65..255 in the first row
    assert t_old.shape_plan(6, 7168, "NONE").label.startswith("ws=4..7 hidden=4096..8191")
    assert t_old.shape_plan(2, 100, "NONE").hidden == 65
    # the table text round-trips through TOML
    assert loads_table(dumps_table(t_new)).shape_plans == t_new.shape_plans


def test_truncations_and_gaps_decide_as_the_header() -> None:
    table = read_trtllm(str(OLD)).tables.resolve("10.3")  # SM 103 runs the SM100 table
    assert "runs the SM100 table" in table.borrowed[0]
    d = decide(table, 100 * 7168 * 2, 6, shape=TokenShape(100, 7168))
    assert "plan ws=4..7 hidden=4096..8191" in d.reason
    assert decide(table, 2, 16, shape=TokenShape(1, 4096)).algorithm == "nccl_symmetric"  # TP 16: out of range
    assert decide(table, 2, 8, shape=TokenShape(40_000, 128)).algorithm == "nccl_symmetric"  # tokens beyond the table
    assert decide(table, 9_000_000, 8, shape=TokenShape(1100, 4096)).algorithm == "nccl"  # over the 8 MB workspace
    with pytest.raises(ValueError):
        decide(table, 0, 8, shape=TokenShape(0, 4096))


def test_every_revision_reads_and_its_decisions_come_from_running_it(tmp_path: Path) -> None:
    with tarfile.open(REVISIONS) as archive:
        names = sorted({m.name.split("/")[0] for m in archive.getmembers()})
    assert len(names) == 9
    for name in names:
        root = revision(tmp_path, name)
        assert main(["check", f"trtllm:{root}"]) in (0, 1), name
        args = ["explain", "--table", f"trtllm:{root}", "--arch", "9.0", "--world-size", "8", "--tokens", "64"]
        assert main([*args, "--hidden", "4096"]) in (0, 1), name


def test_the_guard_sends_a_fused_op_the_map_lacks_to_nccl(tmp_path: Path) -> None:
    # 10a9412: "auto const fusion_op_entry = mapFusionOpToIndex.find(fusionOp); if (... == end()) return NCCL;"
    imported = read_trtllm(str(revision(tmp_path, "10a9412")))
    table = imported.tables.tables["10.0"]
    assert decide(table, 128, 8, shape=TokenShape(64, 4096, "RMS_NORM")).algorithm == "nccl"
    assert decide(table, 128, 8, shape=TokenShape(64, 4096, "NONE")).algorithm == "trtllm_oneshot"
    assert {c.kind.value for c in table.caveats} <= {"unfamiliar"}  # nothing it could not run
    assert not [f for f in imported.findings if f.code == "R110"]  # every fused op has an answer
    # the revision before it dereferences find()'s end() for such an op: no plan, and check says so
    older = read_trtllm(str(revision(tmp_path, "3d56e29")))
    assert "RMS_NORM" not in older.tables.tables["10.0"].fusions
    assert any(f.code == "R110" and "RMS_NORM" in f.message for f in older.findings)


def test_a_revision_without_the_lookup_reads_with_a_caveat(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = revision(tmp_path, "b78a546")  # getMaxRequiredWorkspaceSize only
    imported = read_trtllm(str(root))
    table = imported.tables.resolve("9.0")
    assert table.caps == ((2, 16_000_000), (None, 8_000_000)) and not table.by_shape
    assert any(c.function == "selectStrategyLookUpTable" for c in table.caveats)
    assert main(["check", f"trtllm:{root}"]) == 1
    assert "E401" in capsys.readouterr().out
    args = ["explain", "--table", f"trtllm:{root}", "--arch", "9.0", "--world-size", "8"]
    assert main([*args, "--tokens", "64", "--hidden", "4096"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("nccl") and "unverified" in out


def test_an_unknown_statement_is_a_caveat_at_its_line_and_the_rest_still_reads(tmp_path: Path) -> None:
    root = copy(tmp_path)
    edit(
        root,
        SM_LINE,
        f"    tensorrt_llm::common::logAllReduce(num_tokens);\n{SM_LINE}",
    )
    imported = read_trtllm(str(root))
    table = imported.tables.tables["9.0"]
    (caveat,) = [c for c in table.caveats if c.kind.value == "unevaluated"]
    assert caveat.function == "selectStrategyLookUpTable" and caveat.where.endswith(":98")
    assert "logAllReduce" in caveat.detail and caveat.assumed == "the statement has no effect on the choice"
    original = read_trtllm(str(NEW)).tables.tables["9.0"]
    assert table.shape_plans == original.shape_plans


def test_an_early_return_decides_as_written(tmp_path: Path) -> None:
    root = copy(tmp_path)
    edit(
        root,
        "    auto sm_version = tensorrt_llm::common::getSMVersion();",
        "    if (num_tokens < 32 && tp_size == 8)\n    {\n        return AllReduceStrategyType::TWOSHOT;\n    }\n"
        "    auto sm_version = tensorrt_llm::common::getSMVersion();",
    )
    table = read_trtllm(str(root)).tables.tables["9.0"]
    assert decide(table, 0, 8, shape=TokenShape(31, 4096)).algorithm == "trtllm_twoshot"
    assert decide(table, 0, 8, shape=TokenShape(32, 4096)).algorithm == "trtllm_oneshot"
    assert decide(table, 0, 4, shape=TokenShape(1, 4096)).algorithm == "trtllm_oneshot"
    # the fused ops the map lacks now have an answer at TP 8 below 32 tokens, and none (undefined) above it:
    # their rows have no plan, and a caveat names the function and where
    caveats = [c for c in table.caveats if c.kind.value == "unevaluated"]
    assert {c.function for c in caveats} == {"selectStrategyLookUpTable"}
    assert any("RMS_NORM at arch 9.0, ws 8, hidden 1+, tokens 32+" in c.detail and c.touches(8) for c in caveats)


@pytest.mark.parametrize(
    ("old", "new", "says"),
    [
        ("selectStrategyLookUpTable(\n", "selectStrategyLookUp(\n", "neither selectStrategyLookUpTable"),
    ],
)
def test_a_file_that_is_not_the_header_is_refused(tmp_path: Path, old: str, new: str, says: str) -> None:
    root = copy(tmp_path)
    edit(root, old, new)
    edit(root, "getMaxRequiredWorkspaceSize(int", "getWorkspace(int")
    with pytest.raises(TableError, match=r"customAllReduceUtils\.h") as err:
        read_trtllm(str(root))
    assert says in str(err.value)


def test_a_table_the_header_cannot_read_is_a_caveat_not_an_error(tmp_path: Path) -> None:
    root = copy(tmp_path)
    edit(root, "{4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 0, 0, 0}, {4", "{4, X, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 0, 0, 0}, {4")
    table = read_trtllm(str(root)).tables.resolve("9.0")
    names = {c.function for c in table.caveats if c.kind.value == "unevaluated"}
    assert "AllReduceBestStrategyTableSM90" in names or "selectStrategyLookUpTable" in names


def test_a_header_without_its_enums_is_refused(tmp_path: Path) -> None:
    root = copy(tmp_path)
    (root / "cpp/tensorrt_llm/kernels/customAllReduceKernels.h").unlink()
    with pytest.raises(TableError, match=r"customAllReduceKernels\.h"):
        read_trtllm(str(root))


def test_check_reports_the_reviewers_findings(capsys: pytest.CaptureFixture[str]) -> None:
    found = read_trtllm(str(OLD)).findings
    codes = {f.code for f in found}
    assert {"R101", "R102", "R103", "R104", "R105", "R106", "R107"} <= codes
    text = [str(f) for f in found]
    assert any("B300 (SM 103) runs the SM100 table" in t for t in text)
    assert any("hidden 7168 (DeepSeek-V3) reads the 4096 row" in t for t in text)
    assert any("kNumTokensChoice = 14" in t and "15 entries" in t for t in text)
    assert any("QUANT_NVFP4" in t and "all NCCL" in t for t in text)
    assert main(["check", f"trtllm:{NEW}"]) == 1
    assert "TP 16 is out of range" in capsys.readouterr().out


def test_explain_show_and_diff_take_tokens_and_hidden(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["explain", "--table", f"trtllm:{NEW}", "--arch", "9.0", "--world-size", "8"]
    assert main([*args, "--tokens", "512", "--hidden", "4096"]) == 0
    assert capsys.readouterr().out.startswith("trtllm_twoshot")
    assert main([*args, "--size", "4MiB", "--hidden", "4096"]) == 0  # 512 tokens of bf16
    assert capsys.readouterr().out.startswith("trtllm_twoshot")
    assert main([*args, "--size", "4MiB"]) == 2  # a shape table needs the shape
    assert "decides by shape" in capsys.readouterr().err
    assert main([*args, "--tokens", "5", "--hidden", "4096", "--fusion", "RMS_NORM"]) == 2  # no plan answers it
    assert "has plans for NONE" in capsys.readouterr().err
    assert main(["show", f"trtllm:{NEW}@9.0", "--hidden", "7168", "--fusion", "NONE"]) == 0
    assert "4096..8191" in capsys.readouterr().out
    assert (
        main(
            [
                "diff",
                f"trtllm:{OLD}",
                f"trtllm:{NEW}",
                "--arch",
                "9.0",
                "--world-size",
                "8",
                "--hidden",
                "4096",
                "--tokens",
                "100",
            ]
        )
        == 1
    )
    assert "tokens 100: A trtllm_twoshot | B trtllm_oneshot" in capsys.readouterr().out


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, timeout=60)


def test_review_between_two_revisions_of_the_header(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    root = copy(tmp_path, OLD)
    _git(root, "init", "-q")
    _git(root, "-c", "user.email=t@t", "-c", "user.name=t", "add", ".")
    _git(root, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "005b299")
    for rel in (HEADER, "cpp/tensorrt_llm/kernels/customAllReduceKernels.h"):
        shutil.copy(NEW / rel, root / rel)
    assert main(["review", f"trtllm:{root}", "--base", "HEAD"]) in (0, 1)
    out = capsys.readouterr().out
    assert "hidden 4096 NONE, tokens" in out and "`nccl_symmetric`" in out


def test_export_then_read_back_gives_the_same_decisions(tmp_path: Path) -> None:
    table = read_trtllm(str(OLD)).tables.tables["9.0"]
    block = export_trtllm(table, "artune export", 90)
    assert block.dropped == []
    root = copy(tmp_path, OLD)
    path = root / HEADER
    text = path.read_text()
    start = text.index("inline AllReduceBestStrategyTableType AllReduceBestStrategyTableSM90")
    end = text.index("};", start) + 2
    body = "\n".join(line for line in block.text.splitlines() if not line.startswith("//"))
    path.write_text(text[:start] + body + text[end:])
    back = read_trtllm(str(root)).tables.tables["9.0"]
    for ws in TP_ROWS:
        for fusion in PLANES:
            for hidden in HIDDEN_ROWS:
                for tokens in (*TOKEN_COLUMNS, 3, 100, 20_000, 40_000):
                    shape = TokenShape(tokens, hidden, fusion)
                    assert decide(back, 0, ws, shape=shape).algorithm == decide(table, 0, ws, shape=shape).algorithm


def _measurement(algorithm: str, tokens: int, times: list[float]) -> ShapeMeasurement:
    size = tokens * 4096 * 2
    return ShapeMeasurement(
        8, "NONE", 4096, tokens, Measurement(Candidate(algorithm), size, "bfloat16", 8, tuple(times), 0, call="run")
    )


def test_generator_csv_round_trip_and_the_evidence_rule(tmp_path: Path) -> None:
    # measured here on no GPU: synthetic rounds, one-shot clearly faster below 64 tokens, two-shot above; at
    # 16 tokens a single noisy round says two-shot, which an argmin would write as a flip
    measurements = []
    for k in range(10):
        tokens = 1 << k
        one, two = (10.0, 14.0) if tokens < 64 else (30.0, 20.0)
        rounds = 1 if tokens == 16 else 12
        one_times = [one * (1 + 0.001 * i) for i in range(rounds)]
        two_times = [two * (1 + 0.001 * i) for i in range(rounds)] if tokens != 16 else [9.9]
        measurements += [
            _measurement("trtllm_oneshot", tokens, one_times),
            _measurement("trtllm_twoshot", tokens, two_times),
        ]
    text = write_csv(measurements)
    assert text.splitlines()[0] == ",".join(COLUMNS)
    assert "8,bfloat16,8192,1,4096,ONESHOT,NONE,10.0" in text
    path = tmp_path / "benchmark.tp8.sm90.csv"
    path.write_text(text)
    back = read_csv(path)
    assert {(m.tokens, m.measurement.candidate.algorithm, m.measurement.samples_us) for m in back} == {
        (m.tokens, m.measurement.candidate.algorithm, m.measurement.samples_us) for m in measurements
    }
    derived, again = derive_shape_table(measurements, "9.0", PREFERENCE), derive_shape_table(back, "9.0", PREFERENCE)
    for tokens in range(1, 1024):
        shape = TokenShape(tokens, 4096)
        assert decide(derived, 0, 8, shape=shape).algorithm == decide(again, 0, 8, shape=shape).algorithm
    assert decide(again, 0, 8, shape=TokenShape(16, 4096)).algorithm == "trtllm_oneshot"  # one round is no evidence
    assert decide(again, 0, 8, shape=TokenShape(256, 4096)).algorithm == "trtllm_twoshot"


def test_a_bad_csv_is_an_error_naming_the_row(tmp_path: Path) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(",".join(COLUMNS) + "\n8,bfloat16,8192,1,4096,FASTEST,NONE,10.0\n")
    with pytest.raises(TableError, match=r"bad.csv:2: strategy 'FASTEST'"):
        read_csv(path)
    path.write_text("world_size,time (us)\n8,1\n")
    with pytest.raises(TableError, match="no column"):
        read_csv(path)


def test_the_autotuner_gate_is_read_from_the_checkouts_ops_py(tmp_path: Path) -> None:
    root = copy(tmp_path)
    ops = root / "tensorrt_llm/_torch/distributed/ops.py"
    ops.parent.mkdir(parents=True)
    ops.write_text('import os\n\nDISABLE = os.environ.get(\n    "TLLM_DISABLE_ALLREDUCE_AUTOTUNE", "0") == "1"\n')
    imported = read_trtllm(str(root))
    gate = [f for f in imported.findings if f.code == "R109"]
    assert len(gate) == 1 and gate[0].note and gate[0].source.endswith("ops.py:4")
    assert "TLLM_DISABLE_ALLREDUCE_AUTOTUNE=1" in imported.tables.tables["9.0"].provenance.notes


def test_the_csv_holds_what_the_generator_reads() -> None:
    # the generator (allreduce_heuristic_code_gen.py at TensorRT-LLM 0c9a37db) keys cells by world_size, fusion,
    # hidden_size and num_tokens, takes 'time (us)', and knows these strategy and fused-op names
    strategies = {"NCCL", "NCCL_SYMMETRIC", "ONESHOT", "TWOSHOT"}
    fusions = {"NONE", "RESIDUAL_RMS_NORM", "RESIDUAL_RMS_NORM_QUANT_FP8", "RESIDUAL_RMS_NORM_QUANT_NVFP4"}
    import csv
    import io

    measurements = [
        _measurement(name, 1 << k, [10.0, 11.0])
        for k in range(15)
        for name in ("nccl", "nccl_symmetric", "trtllm_oneshot", "trtllm_twoshot")
    ]
    rows = list(csv.DictReader(io.StringIO(write_csv(measurements))))
    assert len(rows) == 2 * len(measurements)
    assert {r["strategy"] for r in rows} == strategies and {r["fusion"] for r in rows} <= fusions
    for r in rows:
        assert int(r["num_tokens"]) * int(r["hidden_size"]) * 2 == int(r["size"]) and float(r["time (us)"]) > 0
        assert 1 <= int(r["num_tokens"]) <= 1 << 15 and 128 <= int(r["hidden_size"]) <= 1 << 14


def test_cells_the_workspace_cap_overrides_are_reported(tmp_path: Path) -> None:
    root = copy(tmp_path)
    path = root / HEADER
    lines = path.read_text().splitlines(keepends=True)
    # SM90, TP=2, NONE, hidden 8192: ONESHOT at 8192 tokens, 128 MiB of bf16 over the 64 MiB workspace
    assert lines[137].strip() == "{4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 0, 0, 0}},"
    lines[137] = lines[137].replace("4, 0, 0, 0}},", "4, 0, 4, 0}},")
    path.write_text("".join(lines))
    imported = read_trtllm(str(root))
    capped = [f for f in imported.findings if f.code == "R108"]
    assert len(capped) == 1 and capped[0].world_size == 2 and capped[0].source.endswith(":138")
    assert "hidden 8192 from 8192 tokens (ONESHOT)" in capped[0].message
    table = imported.tables.tables["9.0"]
    assert decide(table, 8192 * 8192 * 2, 2, shape=TokenShape(8192, 8192)).algorithm == "nccl"  # the cap wins


def test_the_callers_workspace_rule_is_read_from_the_same_revision(tmp_path: Path) -> None:
    root = revision(tmp_path, "01e2c36")  # with allreduceOp.cpp, cut to AllreduceOp's dispatch
    table = read_trtllm(str(root)).tables.tables["9.0"]
    assert "the caller sends a message over the workspace to NCCL: " in table.provenance.notes
    assert "allreduceOp.cpp:58 (also when !mIsP2PSupported or !mIsNVLINKSupported" in table.provenance.notes
    without = read_trtllm(str(OLD)).tables.tables["9.0"]
    assert "allreduceOp.cpp) is not in this checkout: artune takes AllreduceOp's rule" in without.provenance.notes
    # a caller that stopped comparing the bytes with the workspace is said, not assumed silently
    caller = root / "cpp/tensorrt_llm/thop/allreduceOp.cpp"
    caller.write_text(caller.read_text().replace("message_size_bytes > max_workspace_size || ", ""))
    changed = read_trtllm(str(root)).tables.tables["9.0"]
    (caveat,) = [c for c in changed.caveats if c.function == "AllreduceOp::ifFallbackToNCCL"]
    assert "message_size_bytes > max_workspace_size" in caveat.detail and "runs NCCL" in caveat.assumed
