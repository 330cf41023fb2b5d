"""Export, re-import, diff: ``import(export(T))`` decides as ``T`` does; what a format cannot hold is named."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

from artune.cli import main
from artune.errors import TableError
from artune.formats import read_engine
from artune.formats.nccl.write import export_nccl
from artune.formats.references import reference_set
from artune.formats.sglang.write import CPU_ROLES, as_written, export_sglang
from artune.formats.vllm.write import export_vllm
from artune.machine import cpu_platform
from artune.table.diff import diff_tables, topologies_of
from artune.table.io import loads_table
from artune.table.types import Band, Plan, Platform, Provenance, Table, freeze_params
from artune.tune.build import build_table
from artune.tune.config import TuneConfig
from artune.tune.measurer import CachedMeasurer
from artune.tune.synthetic import SyntheticMeasurer, linear_cost
from artune.tune.tuner import tune_world
from formats_helpers import decision_mismatches

FIXTURES = Path(__file__).parent / "fixtures" / "engines"
MiB = 1 << 20


def reimport_vllm(tmp_path: Path, text: str, arch: str) -> Table:
    path = tmp_path / "all_reduce_utils.py"
    path.write_text(text)
    return read_engine("vllm", str(path)).tables.tables[arch]


def reimport_sglang(tmp_path: Path, text: str, arch: str) -> Table:
    """The exported text read back, as written (SGLang clips it to its workspace again when it runs it)."""
    path = tmp_path / "custom_all_reduce_v2.py"
    path.write_text(text)
    return as_written(read_engine("sglang", str(path)).tables.tables[arch])


@pytest.mark.parametrize("arch", ["9.0", "10.0", "10.3", "10.7"])
def test_vllm_reference_round_trips_exactly(tmp_path: Path, arch: str) -> None:
    table = reference_set("vllm").tables[arch]
    out = export_vllm([table], "test")
    assert out.dropped == []
    assert decision_mismatches(reimport_vllm(tmp_path, out.text, arch), table) == []


@pytest.mark.parametrize("arch", ["9.0", "10.7"])
def test_sglang_reference_round_trips_exactly(tmp_path: Path, arch: str) -> None:
    table = reference_set("sglang").tables[arch]
    out = export_sglang(table, "test", standalone=True)
    assert out.dropped == []
    assert decision_mismatches(reimport_sglang(tmp_path, out.text, arch), as_written(table)) == []


def test_sglang_export_writes_the_engines_own_float_text() -> None:
    text = export_sglang(reference_set("sglang").tables["10.7"], "test").text
    assert "def _sm107_configs(num_sm: int) -> dict[int, AllReduceConfig]:" in text
    assert "graph=_pack_heuristic(2.438 * MB, 2.438 * MB, 128 * MB, Range(2.438 * MB, 128 * MB))," in text
    assert "num_pull_blocks=min(192, num_sm)," in text and "num_mc_blocks=96," in text
    # SM100's 2shot_push rows: 0.5.23's threshold in the fifth slot, after an empty multicast range
    sm100 = export_sglang(reference_set("sglang").tables["10.0"], "test")
    assert sm100.dropped == []
    assert "graph=_pack_heuristic(0.625 * MB, 0.625 * MB, 128 * MB, Range(0, 0), 8 * MB)," in sm100.text


def test_a_standalone_file_with_two_shot_push_names_what_reads_it(tmp_path: Path) -> None:
    out = export_sglang(reference_set("sglang").tables["10.0"], "test", standalone=True)
    assert "two_shot_push_threshold: int = 0" in out.text
    with pytest.raises(TableError, match="give the checkout or the release"):
        reimport_sglang(tmp_path, out.text, "10.0")


def test_vllm_projection_states_what_it_drops(tmp_path: Path) -> None:
    """Graph and eager differ; the eager plan also has an SGLang band vLLM cannot hold."""
    bands_eager = (Band(2 * MiB - 1, ("custom_ar",)), Band(8 * MiB, ("1shot_push",)))
    bands_graph = (Band(4 * MiB - 1, ("custom_ar",)), Band(64 * MiB - 1, ("symm_mem_multimem",)))
    blocks = freeze_params({"1shot_push": {"blocks": 8}})
    plans = tuple(
        Plan(ws, mode, b, "nccl", blocks)
        for ws in (2, 4, 6, 8)
        for mode, b in (("eager", bands_eager), ("graph", bands_graph))
    )
    table = Table(Platform("cuda", "10.7"), Provenance("measured", device="test"), plans)
    out = export_vllm([table], "test")
    assert "2: 2 * MiB,  # 2MiB" in out.text  # the smaller of the two modes' custom_ar bounds
    written = reimport_vllm(tmp_path, out.text, "10.7")
    expected = [f"10.7: {d}" for d in _drops(table, written)]
    assert [d for d in out.dropped if " becomes " in d] == expected and expected
    # eager has no symmetric memory, so no row is written for it; without one vLLM ignores the custom_ar row
    assert any("have no symmetric-memory row" in d and "keeps its 8 MiB default" in d for d in out.dropped)
    assert any("ws=2 eager [2MiB, 8MiB): 1shot_push > nccl becomes custom_ar > nccl" in d for d in out.dropped)
    assert any("ws=2 graph [8MiB, 64MiB): symm_mem_multimem > nccl becomes nccl" in d for d in out.dropped)


def _drops(a: Table, b: Table) -> list[str]:
    from artune.sizes import format_span

    return [
        f"ws={d.world_size} {d.mode} {format_span(d.lo, d.hi)}: {' > '.join(d.a)} becomes {' > '.join(d.b)}"
        for d in diff_tables(a, b, topologies=topologies_of(a))
    ]


def test_sglang_projection_states_what_it_drops(tmp_path: Path) -> None:
    """A one-shot band after a two-shot band: SGLang's one-shot threshold starts at 0."""
    params = freeze_params({"1shot_push": {"blocks": 8}, "2shot_pull": {"blocks": 8}})
    bands = (Band(MiB, ("2shot_pull",)), Band(2 * MiB, ("1shot_push",)))
    table = Table(Platform("cuda", "9.0"), Provenance("modelled"), (Plan(4, "eager", bands, "nccl", params),))
    out = export_sglang(table, "test", standalone=True)
    written = reimport_sglang(tmp_path, out.text, "9.0")
    assert out.dropped == _drops(table, written) and out.dropped
    assert any(d.startswith("ws=4 eager [0, 1MiB]: 2shot_pull > nccl becomes 1shot_push") for d in out.dropped)


def _tuned(costs: Mapping[str, object], world_size: int, baseline: str) -> object:
    bench = SyntheticMeasurer(costs, noise=0.02, seed=1, world_size=world_size, baseline=baseline)  # type: ignore[arg-type]
    return tune_world(CachedMeasurer(bench), TuneConfig.full(budget_s=10.0))


def test_tuned_cpu_table_exports_to_sglang_by_role_and_round_trips(tmp_path: Path) -> None:
    costs = {
        "gloo": linear_cost(400.0, 1.2),
        "shm_one_shot": linear_cost(5.0, 1.0),
        "shm_two_shot": linear_cost(20.0, 3.0),
    }
    table = build_table([_tuned(costs, 2, "gloo"), _tuned(costs, 4, "gloo")], cpu_platform(), date="2026-12-01")
    assert {n for p in table.plans for n in p.algorithms} >= {"shm_one_shot", "shm_two_shot", "gloo"}
    out = export_sglang(table, "test", arch="9.0", standalone=True)
    assert out.dropped[0].startswith("a CPU table written in SGLang's shape by role")
    assert out.dropped[1:] == [
        "an open-ended band is written as 1 << 50 (artune reads it back as open-ended); SGLang clips it to its "
        "workspace, 16 MiB by default, and runs nccl above"
    ]
    assert any(p.open_ended for p in table.plans)
    assert "two_shot" in out.text or "1 << 50" in out.text
    assert "# figures: measured" in out.text and "# written as arch 9.0" in out.text
    written = reimport_sglang(tmp_path, out.text, "9.0")
    rename = lambda name: CPU_ROLES.get(name, name)  # noqa: E731
    # every algorithm available: the role map is exact (SGLang's kernels add a 16-byte alignment rule)
    planned = sorted({p.world_size for p in table.plans})  # SGLang runs nccl at a world size without a config
    assert decision_mismatches(table, written, rename=rename, params=False, static=False, world_sizes=planned) == []


def test_synthetic_gpu_table_round_trips_through_sglang(tmp_path: Path) -> None:
    costs = {
        "gloo": linear_cost(900.0, 1.0),
        "nccl": linear_cost(30.0, 300.0),
        "1shot_push": linear_cost(4.0, 40.0),
        "2shot_pull": linear_cost(9.0, 150.0),
    }
    tuned = build_table([_tuned(costs, 8, "nccl")], Platform("cuda", "10.7"), date="2026-12-01")
    assert {n for p in tuned.plans for n in p.algorithms} >= {"1shot_push", "2shot_pull", "nccl"}
    blocks = freeze_params({"1shot_push": {"blocks": 148}, "2shot_pull": {"blocks": 96}})
    table = tuned.with_changes(
        plans=tuple(Plan(p.world_size, p.mode, p.bands, p.fallback, blocks) for p in tuned.plans)
    )
    out = export_sglang(table, "test", standalone=True)
    assert out.dropped == []
    assert decision_mismatches(reimport_sglang(tmp_path, out.text, "10.7"), table, world_sizes=[8]) == []


def test_nccl_tuner_lines_and_what_they_cannot_hold() -> None:
    params = freeze_params({"nccl_ring": {"channels": 4}})
    bands = (Band(65535, ("custom_ar",)), Band(MiB, ("nccl_tree_ll",)), Band(16 * MiB, ("nccl_ring",)))
    plans = (Plan(8, "eager", bands, "nccl", params), Plan(8, "graph", bands[:1], "nccl"))
    table = Table(Platform("cuda", "10.7"), Provenance("measured", device="B300", date="2026-12-01"), plans)
    out = export_nccl(table, "artune export t.toml --to nccl-tuner")
    rows = [line for line in out.text.splitlines() if not line.startswith("#")]
    assert rows == ["allreduce,65536,1048576,tree,ll,-1,1,8", f"allreduce,{MiB + 1},{16 * MiB},ring,simple,4,1,8"]
    assert out.text.startswith("# artune export of")
    assert "# figures: measured on B300 on 2026-12-01" in out.text
    assert any("no per-arch key" in d for d in out.dropped)
    assert any("ws=8 graph: the CSV has no graph/eager split" in d for d in out.dropped)
    assert any("custom_ar is not an NCCL algorithm" in d for d in out.dropped)


# ------------------------------------------------------------------ the command line


def test_cli_diff_vllm_10_3_against_10_7_differs_only_in_flashinfer_and_names_provenance(capsys) -> None:
    """10.7's custom all-reduce and symmetric-memory rows copy 10.3's; its FlashInfer rows do not."""
    assert main(["diff", "reference:vllm@10.3", "reference:vllm@10.7"]) == 1
    out = capsys.readouterr().out
    ranges = [line for line in out.splitlines() if line.startswith("  ws=")]
    assert ranges and all("flashinfer_ar" in line for line in ranges)
    assert not any(line.startswith(("  ws=2 ", "  ws=6 ")) for line in ranges)  # where both rows are the same
    assert "B provenance: inherited from arch 10.3" in out and "A provenance: published" in out


def test_cli_diff_old_and_new_vllm_checkouts(capsys) -> None:
    old, new = f"vllm:{FIXTURES / 'vllm-old'}", f"vllm:{FIXTURES / 'vllm-new'}"
    assert main(["diff", old, new, "--world-size", "8", "--mode", "eager"]) == 1
    out = capsys.readouterr().out
    # 10.3 is new: the old checkout has no row there, so vLLM runs its default path (no family chain)
    rubin = out[out.index("arch=10.7") :]
    assert "ws=8 mode=eager [8MiB, 64MiB]: A nccl | B symm_mem_multimem > nccl" in rubin
    assert "ws=8 mode=eager [0, 8MiB): A custom_ar > nccl | B flashinfer_ar > nccl" in out  # 10.3: FlashInfer
    assert "mode=graph" not in out and "ws=2" not in out
    # neither checkout holds the dispatch (cuda_communicator.py): both are read by vLLM 0.33.0's rules, so the
    # old symm_mem.py's '<' moves nothing; the release's own code decides where it is read (test_vllm_eval)
    assert "[64MiB, 64MiB]" not in out


def test_cli_diff_published_against_measured(tmp_path: Path, capsys) -> None:
    text = (
        'schema = 1\n[platform]\nkind = "cuda"\narch = "10.7"\n[provenance]\nsource = "measured"\ndevice = "B300"\n'
        '[[plan]]\nworld_size = 8\nmode = "graph"\nfallback = "nccl"\n'
        'bands = [{ upto = "4MiB", algorithm = "1shot_push" }]\nparams = { "1shot_push" = { blocks = 148 } }\n'
    )
    path = tmp_path / "measured.toml"
    path.write_text(text)
    assert main(["diff", "reference:sglang", str(path), "--world-size", "8", "--mode", "graph"]) == 1
    out = capsys.readouterr().out
    assert "(2.438MiB, 4MiB]: A 2shot_pull_mc > 2shot_pull > nccl | B 1shot_push > nccl" in out
    assert "B provenance: measured, B300" in out


def test_cli_import_writes_published_tables_with_file_and_commit(tmp_path: Path, capsys) -> None:
    assert main(["import", "sglang", str(FIXTURES / "sglang-b"), "--out", str(tmp_path)]) == 0
    written = sorted(p.name for p in tmp_path.iterdir())
    assert written == [
        "sglang-10.0.toml",
        "sglang-10.7.toml",
        "sglang-9.0.toml",
        "sglang-default.toml",
    ]
    table = loads_table((tmp_path / "sglang-10.7.toml").read_text())
    assert table.provenance.source == "published"
    assert "custom_all_reduce_v2.py" in table.provenance.notes
    from artune.formats.files import git_commit

    commit = git_commit(FIXTURES)
    if commit:  # the fixtures sit in this project's work tree when it is a git checkout
        assert f"at git commit {commit}" in table.provenance.notes
    ref = reference_set("sglang").tables["10.7"]
    assert decision_mismatches(table, ref) == []


def test_cli_check_and_explain_take_engine_sources(capsys) -> None:
    assert main(["check", f"vllm:{FIXTURES / 'vllm-new'}"]) == 1
    out = capsys.readouterr().out
    assert "arch=10.7: 10.7 = 10.3 in 3 of 3 tables: measured, or inherited?" in out
    args = ["explain", "--table", f"sglang:{FIXTURES / 'sglang-b'}", "--world-size", "8", "--size", "3MiB"]
    assert main([*args, "--mode", "graph", "--arch", "10.7", "--json"]) == 0
    assert '"algorithm": "2shot_pull_mc"' in capsys.readouterr().out
    assert main(args) == 2  # several arches: --arch is needed
    assert "give --arch" in capsys.readouterr().err


def test_cli_export_prints_paste_ready_text_and_projection_on_stderr(tmp_path: Path, capsys) -> None:
    assert main(["export", "reference:vllm@10.7", "--to", "vllm"]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("# artune export of reference:vllm [cuda arch=10.7]")
    assert "# figures: inherited from arch 10.3, not measured on 10.7" in captured.out
    assert '"10.7": [6, 8],' in captured.out and captured.err == ""
    assert main(["export", "bundled:cpu", "--to", "sglang"]) == 2
    assert "pass --arch" in capsys.readouterr().err
    assert main(["export", "reference:sglang", "--to", "sglang"]) == 2  # a set: pick an arch
    assert main(["export", "reference:sglang@10.7", "--to", "nccl-tuner"]) == 0
    assert "is not an NCCL algorithm" in capsys.readouterr().err


def test_sglang_export_names_a_missing_block_count() -> None:
    params = freeze_params({"1shot_push": {"blocks": 8}})  # none for 2shot_pull's pull grid
    bands = (Band(MiB, ("1shot_push",)), Band(8 * MiB, ("2shot_pull",)))
    table = Table(Platform("cuda", "9.0"), Provenance("modelled"), (Plan(4, "graph", bands, "nccl", params),))
    out = export_sglang(table, "test")
    assert "num_push_blocks=8," in out.text and "num_pull_blocks=num_sm," in out.text
    assert out.dropped[0] == "ws=4: no blocks parameter for the pull kernels; written as num_sm"
