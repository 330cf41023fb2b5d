"""Reading the engines' own files: every shape, the reviewers' findings, and clear errors, never a wrong table."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from artune.errors import TableError, Unsupported
from artune.formats import read_engine
from artune.formats.pyeval import Interpreter, constants
from artune.formats.references import reference_set
from artune.table.check import copied_archs, shadowed_rules, unaligned_rules
from artune.table.decide import decide
from artune.table.priority import SizeRule, below, upto
from formats_helpers import available, decision_mismatches

FIXTURES = Path(__file__).parent / "fixtures" / "engines"
VLLM_UTILS = "vllm/distributed/device_communicators/all_reduce_utils.py"
SGLANG_CONFIGS = "python/sglang/srt/distributed/device_communicators/configs/custom_all_reduce_v2.py"
MiB = 1 << 20


def messages(imported) -> list[str]:
    return [str(f) for f in imported.findings]


# ------------------------------------------------------------------ vLLM


def _figures(name: str):
    from artune.formats.files import read_source
    from artune.formats.vllm.code import ReleaseCode
    from artune.formats.vllm.figures import FILES, read_figures

    root = FIXTURES / name
    return read_figures(ReleaseCode([read_source(root / f) for f in FILES if (root / f).is_file()], keep=False))


def _available(ws: int, nbytes: int, multicast: bool = True) -> frozenset[str]:
    from artune import catalog

    return catalog.available(ws, "bfloat16", nbytes, multicast)


def test_vllm_tables_alone_are_read_by_the_reference_rules_and_say_so() -> None:
    """Tables without the dispatch that reads them (no cuda_communicator.py): vLLM 0.33.0's rules, named in every
    table's provenance (its symm_mem.py's older '<' is not the dispatch: the release's own code is read whole)."""
    imported = read_engine("vllm", str(FIXTURES / "vllm-old"))
    assert set(imported.tables.tables) == {"9.0", "10.0"}
    table = imported.tables.tables["9.0"]
    assert table.provenance.source == "published" and table.rules == "vllm"
    assert "cuda_communicator.py not read: the dispatch of vLLM 0.33.0 (reference:vllm)" in table.provenance.notes
    for n, want in ((8 * MiB - 16, "custom_ar"), (8 * MiB, "symm_mem_two_shot"), (64 * MiB, "symm_mem_two_shot")):
        assert decide(table, n, 2, "eager", _available(2, n)).algorithm == want
    assert decide(table, 64 * MiB + 16, 2, "eager", _available(2, 64 * MiB + 16)).algorithm == "nccl"
    # without multicast symmetric memory does not start, and custom_ar keeps its 8 MiB default, not its row
    bare = decide(table, 1 * MiB, 8, "eager", _available(8, MiB, multicast=False), multicast=False)
    assert bare.algorithm == "custom_ar" and "multicast=off" in bare.reason
    assert decide(table, 1 * MiB, 8, "eager", _available(8, MiB)).algorithm == "symm_mem_multimem"
    figures = _figures("vllm-old")
    assert figures.nccl_symm["thresholds"] == {4: 2 * MiB, 8: 1 * MiB}
    assert figures.fi_old == {2: 64 * MiB, 4: MiB, 6: MiB // 2, 8: MiB // 2}


def test_vllm_new_shape_decides_as_the_reference() -> None:
    """The newest shape, read without envs.py, decides as reference:vllm (vLLM 0.33.0) everywhere."""
    imported = read_engine("vllm", str(FIXTURES / "vllm-new"))
    ref = reference_set("vllm")
    for arch in ("9.0", "10.0", "10.3", "10.7"):
        assert decision_mismatches(imported.tables.tables[arch], ref.tables[arch]) == [], arch
    assert decision_mismatches(imported.tables.default, ref.default) == []
    assert "envs.py not read" in imported.tables.tables["9.0"].provenance.notes


def test_vllm_new_shape_reads_every_table() -> None:
    figures = _figures("vllm-new")
    assert figures.multimem == {"9.0": [4, 6, 8], "10.0": [6, 8], "10.3": [6, 8], "10.7": [6, 8]}
    assert figures.custom_ar["9.0"][6] == MiB // 2
    assert figures.nccl_symm["custom_ar_preferred_ranges"][4] == (16 * 1024, 512 * 1024)
    assert figures.fi_fusion["10.0"][16] == 64 and figures.fi_oneshot["9.0"][8] == 0.5
    assert figures.fi_mnnvl[("10.3", 16, 4)] == 8 and figures.fi_mnnvl[("10.0", 8, 1)] == 128
    assert figures.line("CUSTOM_ALL_REDUCE_MAX_SIZES", "10.7").endswith(f"{VLLM_UTILS}:27")
    assert figures.line("FI_MNNVL_ALLREDUCE_MAX_SIZE_MB", "10.3", 4, 1).endswith(f"{VLLM_UTILS}:46")


def test_vllm_check_reports_a_copied_arch_with_file_and_line() -> None:
    found = messages(read_engine("vllm", str(FIXTURES / "vllm-new")))
    copied = [m for m in found if "10.7 = 10.3 in 3 of 3 tables: measured, or inherited?" in m]
    assert copied and copied[0].startswith(f"{FIXTURES / 'vllm-new' / VLLM_UTILS}:27: warning E101: arch=10.7")
    assert "its FI_ALLREDUCE_FUSION_MAX_SIZE_MB row differs: ws 8: 2 MB (10.3: 4 MB)" in copied[0]
    assert any("custom_ar rows above 8MiB are capped" in m and "9.0 ws=2: 64MiB" in m for m in found)
    assert any("world sizes 3, 5, 7, 9-15 have no path on any arch" in m for m in found)
    assert any("rows that never run with vLLM's defaults: flashinfer_ar takes every size they hold" in m for m in found)
    assert len([m for m in found if ": note " not in m]) <= 8
    table = read_engine("vllm", str(FIXTURES / "vllm-new")).tables.tables["10.7"]
    assert table.provenance.source == "inherited" and table.provenance.inherited_from == "10.3"


def test_vllm_release_without_tables_says_what_it_runs() -> None:
    """vLLM 0.10 has no per-arch tables: one note, and the default path on every arch."""
    imported = read_engine("vllm", str(FIXTURES / "vllm-0.10"))
    assert dict(imported.tables.tables) == {}
    (note,) = imported.findings
    assert note.severity == "note" and "has no per-arch tables" in note.message
    assert "custom_ar below 8MiB at world sizes 2, 4, 6, 8, nccl otherwise" in note.message
    table = imported.tables.resolve("10.7")
    assert decide(table, 4 * MiB, 4, "eager", _available(4, 4 * MiB)).algorithm == "custom_ar"
    assert decide(table, 8 * MiB, 4, "eager", _available(4, 8 * MiB)).algorithm == "nccl"
    assert "has no row for arch 10.7" in decide(table, 1, 4).reason


def _copy(tmp_path: Path, name: str) -> Path:
    target = tmp_path / name
    shutil.copytree(FIXTURES / name, target)
    return target


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


def test_vllm_tables_out_of_step_raise_or_fall_through(tmp_path: Path) -> None:
    root = _copy(tmp_path, "vllm-new")
    utils = root / VLLM_UTILS
    _edit(utils, '    "10.7": {2: 4 * MiB, 4: 32 * MiB, 6: 32 * MiB, 8: 64 * MiB},\n', "")
    _edit(utils, "        6: 1 * MiB,  # 1 MB\n", "")
    _edit(root / "vllm/distributed/device_communicators/symm_mem.py", '        "10.3": [6, 8],\n', "")
    imported = read_engine("vllm", str(root))
    found = messages(imported)
    assert any("10.7 is in _WORLD_SIZES_MULTIMEM but not in SYMM_MEM_ALL_REDUCE_MAX_SIZES" in m for m in found)
    raises = [m for m in found if ": error E202: " in m]
    assert any("10.3 is in SYMM_MEM_ALL_REDUCE_MAX_SIZES but not in _WORLD_SIZES_MULTIMEM" in m for m in raises)
    assert any("rows never used" in m and "10.7 ws=2" in m for m in found)  # custom_ar rows need symmetric memory
    assert not any("10.7 = 10.3" in m for m in found)  # no longer a copy in every table
    assert imported.tables.tables["10.3"].plan(6, "eager") is None  # vLLM raises there: nothing to decide
    # vLLM 0.33.0 checks the world size is in the arch's custom row: without ws 6, custom_ar keeps 8 MiB there
    plan = imported.tables.tables["10.0"].plan(6, "eager")
    assert plan is not None and plan.bands[0].candidates == ("custom_ar", "symm_mem_multimem")


def test_vllm_defaults_the_rules_do_not_describe_are_caveats_not_exits(tmp_path: Path) -> None:
    root = _copy(tmp_path, "vllm-new")
    envs = root / "vllm/envs.py"
    envs.write_text(
        "import os\nenvironment_variables = {\n"
        '    "VLLM_ALLREDUCE_USE_SYMM_MEM": lambda: bool(int(os.getenv("VLLM_ALLREDUCE_USE_SYMM_MEM", "1"))),\n'
        '    "VLLM_USE_NCCL_SYMM_MEM": lambda: bool(int(os.getenv("VLLM_USE_NCCL_SYMM_MEM", "1"))),\n}\n'
    )
    (caveat,) = [c for c in read_engine("vllm", str(root)).tables.tables["9.0"].caveats if "NCCL" in c.function]
    assert caveat.function == "envs.VLLM_USE_NCCL_SYMM_MEM" and "NCCL symmetric memory runs by default" in caveat.detail
    assert "takes no message" in caveat.assumed
    envs.write_text(envs.read_text().replace('"VLLM_USE_NCCL_SYMM_MEM", "1"', '"VLLM_USE_NCCL_SYMM_MEM", "0"'))
    imported = read_engine("vllm", str(root))  # FlashInfer is not in this envs.py: off
    assert "flashinfer_ar" not in imported.tables.tables["9.0"].plan(2, "eager").algorithms
    assert not imported.tables.tables["9.0"].caveats
    envs.write_text("environment_variables = {'VLLM_ALLREDUCE_USE_SYMM_MEM': lambda: read_it()}\n")
    (caveat,) = read_engine("vllm", str(root)).tables.tables["9.0"].caveats
    assert caveat.function == "envs.VLLM_ALLREDUCE_USE_SYMM_MEM" and "cannot be computed" in caveat.detail
    assert "name 'read_it' is not bound" in caveat.detail and caveat.assumed == "vLLM 0.33.0's default, True"


def test_vllm_flashinfer_one_shot_above_its_workspace_is_reported(tmp_path: Path) -> None:
    root = _copy(tmp_path, "vllm-new")
    _edit(
        root / "vllm/compilation/passes/fusion/allreduce_rms_fusion.py",
        "90: {2: 32, 4: 2, 8: 0.5}",
        "90: {2: 32, 4: 2, 8: 16}",
    )
    found = messages(read_engine("vllm", str(root)))
    assert any("FlashInfer one-shot bound 16 MB is above FlashInfer's 64MB / world size = 8 MB" in m for m in found)


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("CUSTOM_ALL_REDUCE_MAX_SIZES = load_sizes()\n", "name 'load_sizes' is not bound"),
        ("MiB = 1 << 20\nCUSTOM_ALL_REDUCE_MAX_SIZES = {'9.0': {2: MiB * unknown}}\n", "name 'unknown' is not bound"),
        ("import torch\nCUSTOM_ALL_REDUCE_MAX_SIZES = sizes_for(torch.cuda)\n", "name 'sizes_for' is not bound"),
        ("import torch\nCUSTOM_ALL_REDUCE_MAX_SIZES = torch.load('x')\n", "computed by code from outside the files"),
    ],
)
def test_vllm_tables_it_cannot_compute_are_caveats_naming_the_line(tmp_path: Path, text, why, capsys) -> None:
    """The engine's own file with a table artune cannot compute: read on, and say where and why (E401)."""
    from artune.cli import main

    path = tmp_path / "all_reduce_utils.py"
    path.write_text(text)
    table = read_engine("vllm", str(path)).tables.default
    (caveat,) = table.caveats
    assert caveat.function == "CUSTOM_ALL_REDUCE_MAX_SIZES" and caveat.where == f"{path}:{text.count(chr(10))}"
    assert why in caveat.detail and "its rows are not read" in caveat.assumed
    assert main(["check", f"vllm:{path}"]) == 1
    out = capsys.readouterr().out
    assert f"{path}:{text.count(chr(10))}: warning E401: " in out and "Traceback" not in out


@pytest.mark.parametrize(
    ("text", "construct"),
    [
        ("CUSTOM_ALL_REDUCE_MAX_SIZES = {9.0: {2: 1}}\n", 'expected {"M.m"'),
        ("CUSTOM_ALL_REDUCE_MAX_SIZES = {'9.0': {2: 1.5}}\n", "int bytes"),
        ("X = 1\n", "no CUSTOM_ALL_REDUCE_MAX_SIZES here"),
        ("CUSTOM_ALL_REDUCE_MAX_SIZES = {\n", "not valid Python"),
    ],
)
def test_vllm_files_that_are_not_its_tables_are_errors_naming_the_construct(tmp_path: Path, text, construct) -> None:
    path = tmp_path / "all_reduce_utils.py"
    path.write_text(text)
    with pytest.raises(TableError, match=construct) as err:
        read_engine("vllm", str(path))
    assert str(path) in str(err.value)


def test_cli_import_of_a_file_that_is_not_vllms_exits_2(tmp_path: Path, capsys) -> None:
    from artune.cli import main

    path = tmp_path / "all_reduce_utils.py"
    path.write_text("TABLES = {}\n")
    assert main(["import", "vllm", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}" in err and "no CUSTOM_ALL_REDUCE_MAX_SIZES here" in err and "Traceback" not in err
    assert main(["import", "sglang", str(tmp_path / "missing")]) == 2


# ------------------------------------------------------------------ SGLang


def test_sglang_configs_alone_decide_by_sglang_rules_clipped_to_the_workspace() -> None:
    """A configs file with no communicator beside it: SGLang's rules (no family chain, nccl where no config), the
    documented order, every bound clipped to the 16 MiB default workspace with the rows as written kept."""
    imported = read_engine("sglang", str(FIXTURES / "sglang-b"))
    assert {"9.0", "10.0", "10.7"} <= set(imported.tables.tables)
    tables = imported.tables
    assert all(t.rules == "sglang" for t in tables.tables.values())
    b300 = tables.resolve("10.3")  # the file's dispatch gives 10.x minor < 7 the SM100 configs
    assert b300.plans == tables.tables["10.0"].plans and "arch 10.0's" in b300.borrowed[0]
    assert decide(tables.resolve("12.0"), 1 * MiB, 9, "eager").algorithm == "1shot_push"  # its default, 2..16
    assert decide(tables.resolve("10.0"), 1 * MiB, 12, "eager").algorithm == "nccl"  # no config at 12 ranks
    above = decide(tables.resolve("9.0"), 20 * MiB, 2, "eager")
    assert above.algorithm == "nccl" and "as written: 1shot_push/1shot_pull/2shot_pull (16MiB, 32MiB]" in above.reason
    assert decide(tables.resolve("9.0"), 16 * MiB, 2, "eager").algorithm == "1shot_push"
    assert tables.resolve("10.0").plan(4, "graph").params_for("2shot_push") == {"blocks": 148}
    notes = [f for f in imported.findings if f.severity == "note"]
    assert notes and "no CustomAllReduceV2 beside this configs file" in notes[0].message


def test_sglang_multinode_bands_replace_only_the_eager_heuristic_across_a_rack() -> None:
    imported = read_engine("sglang", str(FIXTURES / "sglang-b"))
    table = imported.tables.tables["10.0"]
    assert "10.0/multinode" not in imported.tables.tables  # the bands are the arch's plans across hosts
    rack = {"hosts": 2, "nvlink": "rack"}
    assert decide(table, 1 * MiB, 8, "eager", **rack).algorithm == "2shot_push"
    assert decide(table, 288 * 1024 - 16, 8, "eager", **rack).algorithm == "1shot_push"
    assert "_MULTINODE_PUSH_BANDS" in decide(table, 1 * MiB, 8, "eager", hosts=4, nvlink="rack").reason
    assert decide(table, 1 * MiB, 8, "eager").algorithm == "2shot_pull_mc"
    over = decide(table, 1 * MiB, 8, "eager", hosts=2, nvlink="host")
    assert over.algorithm == "nccl"  # no clique across a network
    assert {p.world_size for p in table.plans if p.hosts > 1} == {8}  # only the world sizes the bands name
    for size in (0, 300 * 1024, 1 * MiB, 20 * MiB):
        a, b = decide(table, size, 8, "graph", **rack), decide(table, size, 8, "graph")
        assert (a.algorithm, dict(a.params)) == (b.algorithm, dict(b.params))


def test_sglang_findings_name_the_file_and_line() -> None:
    found = messages(read_engine("sglang", str(FIXTURES / "sglang-b")))
    path = str(FIXTURES / "sglang-b" / SGLANG_CONFIGS)
    shadow = [m for m in found if "arch=10.7" in m and "1shot_pull is shadowed by 1shot_push" in m]
    assert shadow and shadow[0].startswith(f"{path}:117:")
    assert any("bounds above 16MiB are clipped to it by SGLang's default workspace" in m for m in found)
    assert any("arch=10.7" in m and "world sizes 9, 10, 11, 12, 13, 14, 15 have no config" in m for m in found)


def _one(name: str, arch: str):
    return read_engine("sglang", str(FIXTURES / name)).tables.resolve(arch)


KB = 1024


@pytest.mark.parametrize(
    ("fixture", "arch", "ws", "mode", "size", "available", "algorithm"),
    [
        # A: one builder per world size; Range(0, 0) still matches size 0; 10.7 runs SM100 there
        ("sglang-a", "10.0", 8, "graph", 512 * KB, None, "1shot_push"),
        ("sglang-a", "10.0", 8, "graph", 8 * MiB, None, "2shot_pull_mc"),
        ("sglang-a", "10.7", 8, "eager", 768 * KB + 16, None, "2shot_pull_mc"),
        ("sglang-a", "9.0", 4, "graph", 0, frozenset({"2shot_pull_mc", "nccl"}), "2shot_pull_mc"),
        ("sglang-a", "12.0", 6, "eager", 1 * MiB, None, "1shot_push"),
        # A': the fifth slot is lamport, tried first
        ("sglang-a2", "10.0", 4, "graph", 2 * MiB, None, "2shot_lamport"),
        ("sglang-a2", "10.0", 4, "graph", 9 * MiB, None, "2shot_pull"),
        ("sglang-a2", "9.0", 4, "graph", 0, frozenset({"2shot_pull_mc", "nccl"}), "nccl"),
        # C: (max_bytes, algo) rows, first match; MC rows skipped without multicast
        ("sglang-c", "10.0", 8, "graph", 8 * MiB - 1, None, "2shot_pull"),
        ("sglang-c", "10.0", 8, "graph", 8 * MiB, None, "2shot_pull_mc"),
        ("sglang-c", "10.0", 8, "eager", 2 * MiB + MiB // 4, None, "1shot_push"),
        ("sglang-c", "10.0", 8, "eager", 3 * MiB, frozenset({"2shot_pull", "nccl"}), "2shot_pull"),
        # D: Row helpers truncate (int(2.438 * MB) = 2556428) and mc has a lower bound
        ("sglang-d", "10.7", 8, "graph", 2556428, None, "1shot_push"),
        ("sglang-d", "10.7", 8, "graph", 2556429, None, "2shot_pull_mc"),
        ("sglang-d", "10.7", 8, "graph", 2556427, frozenset({"2shot_pull_mc", "nccl"}), "nccl"),
        ("sglang-d", "12.0", 2, "graph", 2 * MiB, None, "2shot_pull"),
        # E: band policy; the multicast band's neighbours
        ("sglang-e", "9.0", 8, "graph", 8 * MiB - 1, None, "2shot_pull"),
        ("sglang-e", "9.0", 8, "graph", 8 * MiB, None, "2shot_pull_mc"),
        ("sglang-e", "9.0", 8, "eager", 12 * MiB, frozenset({"2shot_pull", "nccl"}), "2shot_pull"),
        ("sglang-e", "9.0", 8, "eager", 64 * MiB, None, "nccl"),  # above the 16 MiB default workspace
        ("sglang-e", "12.0", 4, "eager", 1 * MiB, None, "2shot_pull"),
        # 2.0: THRESHOLD_2_SHOT_MAP, the H200 map for every arch but SM100, two-shot up to 16 MiB
        ("sglang-20", "10.0", 8, "eager", 720 * KB, None, "1shot_push"),
        ("sglang-20", "10.0", 8, "eager", 720 * KB + 16, None, "2shot_pull"),
        ("sglang-20", "9.0", 4, "eager", 300 * KB, None, "1shot_push"),
        ("sglang-20", "9.0", 4, "eager", 400 * KB, None, "2shot_pull"),
        ("sglang-20", "9.0", 2, "eager", 16 * MiB + 16, None, "nccl"),
    ],
)
def test_sglang_every_shape(fixture, arch, ws, mode, size, available, algorithm) -> None:
    assert decide(_one(fixture, arch), size, ws, mode, available).algorithm == algorithm


def test_sglang_unknown_shape_and_unsupported_constructs_are_errors(tmp_path: Path) -> None:
    """A configs file with nothing artune can read is refused, naming what it could not evaluate; one whose
    rows read past an unknown construct is read, the construct a caveat on its tables."""
    path = tmp_path / "custom_all_reduce_v2.py"
    path.write_text("KB = 1024\nTABLE = {2: 1}\n")
    with pytest.raises(TableError, match="not a shape artune knows"):
        read_engine("sglang", str(path))
    path.write_text(
        "import torch\ndef _get():\n    torch.cuda.get_device_capability()\n    while True:\n        pass\n"
    )
    with pytest.raises(TableError, match=r"returned None.*could not evaluate: _get \(.*:4\): 'while True:' not"):
        read_engine("sglang", str(path))
    path.write_text(
        "import torch\nfrom x import sms\ndef _get():\n    torch.cuda.get_device_capability()\n    return sms()\n"
    )
    with pytest.raises(TableError, match=r"calls 'x.sms', which comes from outside the file"):
        read_engine("sglang", str(path))
    text = (FIXTURES / "sglang-b" / SGLANG_CONFIGS).read_text()
    path.write_text(
        text.replace(
            "\n@cache\ndef _get_all_reduce_configs",
            "\nwhile False:\n    pass\n\n@cache\ndef _get_all_reduce_configs",
            1,
        )
    )
    tables = read_engine("sglang", str(path)).tables
    (caveat,) = {c for t in tables.tables.values() for c in t.caveats}
    assert caveat.function == "module level" and caveat.assumed == "the statement has no effect"
    assert tables.tables.keys() == read_engine("sglang", str(FIXTURES / "sglang-b")).tables.tables.keys()


@pytest.mark.parametrize(
    ("engine", "name", "text", "expected"),
    [
        ("sglang", "custom_all_reduce_v2.py", "THRESHOLD_2_SHOT_MAP = {2: 5}\n", ":1: THRESHOLD_2_SHOT_MAP is {2: 5}"),
        ("sglang", "custom_all_reduce_v2.py", "def _sm90_tunings(n):\n    return {'x': (1, 2, 3)}\n", ":1: _sm90"),
        (
            "sglang",
            "custom_all_reduce_v2.py",
            "import torch\nfrom typing import NamedTuple\nclass C(NamedTuple):\n    graph: tuple\n    eager: tuple\n"
            "def _get():\n    torch.cuda.get_device_capability()\n"
            "    return {2: C(((1, ('X.ONE_SHOT_PUSH', 0)),), ())}\n"
            "_MULTINODE_PUSH_BANDS = {1: 2}\n",
            ":9: _MULTINODE_PUSH_BANDS is not a dict",
        ),
        (
            "vllm",
            "all_reduce_utils.py",
            "CUSTOM_ALL_REDUCE_MAX_SIZES = {'9.0': {2: 1, 4: 1, 6: 1, 8: 1}}\n"
            "_FI_ALLREDUCE_ONE_SHOT_MAX_SIZES_MB = {90: {0: 1}}\n",
            ":2: _FI_ALLREDUCE_ONE_SHOT_MAX_SIZES_MB: expected",
        ),
    ],
)
def test_malformed_tables_name_the_line(tmp_path: Path, engine, name, text, expected) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(TableError) as err:
        read_engine(engine, str(path))
    assert str(err.value).startswith(f"{path}{expected}")


def test_the_evaluator_runs_nothing_from_the_file(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    source = f"import os\nos.system('touch {marker}')\n"
    with pytest.raises(Unsupported, match=r"calls 'os\.system'"):
        Interpreter(source, "evil.py").run_module()
    source = f"x = open('{marker}', 'w')\n"
    with pytest.raises(Unsupported, match="name 'open' is not bound"):
        Interpreter(source, "evil.py").run_module()
    source = "x = (1).__class__.__subclasses__()\n"
    with pytest.raises(Unsupported, match="attribute '__class__'"):
        Interpreter(source, "evil.py").run_module()
    with pytest.raises(Unsupported, match="calls nested deeper"):
        Interpreter("def f(n):\n    return f(n)\nx = f(1)\n", "deep.py").run_module()
    for big in ("2 ** 100000", "(2 ** 4096) ** 4096", "1 << (1 << 20)", "'x' * 10 ** 9", "[0] * 10 ** 9"):
        with pytest.raises(Unsupported, match="result too large"):
            Interpreter(f"x = {big}\n", "big.py").run_module()
    with pytest.raises(Unsupported, match="longer than"):
        Interpreter("x = range(10 ** 12)\n", "long.py").run_module()
    with pytest.raises(Unsupported, match="attribute 'format'"):
        Interpreter("x = '{0.__class__}'.format(1)\n", "fmt.py").run_module()
    assert not marker.exists()


@pytest.mark.parametrize(
    "source",
    ["x = 1\ny, z = 5\n", "x = 1\nfor a, b in [1]:\n    pass\n", "x = 1\ny = {[1]: 2}\n", "x = {}\nx[[1]] = 2\n"],
)
def test_misused_values_are_errors_naming_the_line_not_tracebacks(source: str) -> None:
    with pytest.raises(Unsupported, match=r"^bad\.py:2: .*TypeError"):
        Interpreter(source, "bad.py").run_module()


def test_deeply_nested_input_is_an_error_not_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "all_reduce_utils.py"
    path.write_text("CUSTOM_ALL_REDUCE_MAX_SIZES = " + "(" * 5000 + "1" + ")" * 5000 + "\n")
    with pytest.raises(TableError, match=r"nested too deeply|not valid Python"):
        read_engine("vllm", str(path))


def test_constant_evaluator_is_restricted_to_constants() -> None:
    values, lines, _tree = constants(
        "MiB = 1024 * 1024\nA = {'9.0': {2: MiB // 2}}\nB = f(1)\nC = [x for x in A]\n", "m.py"
    )
    assert values["A"] == {"9.0": {2: 512 * 1024}} and lines["A"] == 2
    assert "B" not in values and "C" not in values


# ------------------------------------------------------------------ pure checks


def test_copied_archs() -> None:
    tables = {"a": {"1.0": 1, "2.0": 2, "3.0": 2}, "b": {"1.0": 5, "2.0": 6, "3.0": 6}, "c": {"2.0": 9}}
    assert copied_archs(tables) == [("3.0", "2.0", 2, 2)]


def test_shadowed_and_alignment_unreachable_rules() -> None:
    rules = [upto("1shot_push", 1000), upto("1shot_pull", 1007), upto("2shot_pull", 4096)]
    assert unaligned_rules(rules) == [(1, 1001, 1007)]
    assert shadowed_rules([upto("1shot_push", 4096), upto("1shot_pull", 1024)]) == [(1, ("1shot_push",))]
    # an earlier rule with a stricter condition (multicast) does not shadow
    assert shadowed_rules([upto("2shot_pull_mc", 4096), upto("2shot_pull", 1024)]) == []
    # custom_ar needs 16-byte sizes, symmetric memory 4: symm below custom_ar still runs for 4-byte sizes
    assert shadowed_rules([below("custom_ar", 1 << 20), below("symm_mem_two_shot", 1 << 19)]) == []
    assert shadowed_rules([SizeRule("1shot_push", 5, 4)]) == []


def test_sglang_band_the_alignment_rule_makes_unreachable(tmp_path: Path) -> None:
    root = _copy(tmp_path, "sglang-b")
    _edit(
        root / SGLANG_CONFIGS,
        "3: config(3, graph=(1.25 * MB, 1.25 * MB, 128 * MB),",
        "3: config(3, graph=(1.25 * MB, 1.25 * MB + 8, 128 * MB),",
    )
    found = messages(read_engine("sglang", str(root)))
    hit = [m for m in found if "arch=9.0 ws=3" in m and "1shot_pull is left only" in m]
    assert hit and "holds no size its alignment rule lets through" in hit[0]
    assert hit[0].startswith(f"{root / SGLANG_CONFIGS}:54:")


# ------------------------------------------------------------------ SGLang: the dispatch read from the communicator

PICK = "python/sglang/srt/distributed/device_communicators"


def test_sglang_order_comes_from_the_communicators_dispatch() -> None:
    """``push_limit`` is a field no release has: ``_pick_config`` tries it first, as 2shot_push, so artune does."""
    tables = read_engine("sglang", str(FIXTURES / "sglang-pick")).tables
    table = tables.resolve("10.0")
    assert table.rules == "sglang"
    got = lambda n, mc=True: decide(table, n, 8, "graph", available(8, n, "bfloat16", mc)).algorithm  # noqa: E731
    assert got(64 * KB) == "2shot_push"
    assert got(64 * KB + 16) == "1shot_push"
    assert got(1 * MiB) == "2shot_pull"
    # Range(20 MB, 64 MB).clip(16 MiB) is Range(16 MiB, 16 MiB): multicast takes exactly the workspace's size
    assert got(16 * MiB - 16) == "2shot_pull"
    assert got(16 * MiB) == "2shot_pull_mc"
    assert got(16 * MiB, mc=False) == "2shot_pull"
    assert got(16 * MiB + 16) == "nccl"
    assert got(64 * KB + 8) == "nccl"  # should_custom_ar takes multiples of 16 bytes only
    plan = table.plan(8, "graph")
    assert plan is not None and plan.spans(as_written=True)[-2] == (20 * MiB, 64 * MiB, ("2shot_pull_mc", "2shot_pull"))
    assert plan.params_for("2shot_pull_mc") == {"blocks": 32}
    assert decide(table, 1 * MiB, 3, "eager").algorithm == "nccl"  # __init__ raises there


def test_sglang_findings_from_the_communicator_name_severity_file_and_line() -> None:
    imported = read_engine("sglang", str(FIXTURES / "sglang-pick"))
    configs = f"{FIXTURES / 'sglang-pick' / PICK}/configs/custom_all_reduce_v2.py"
    by = {f.severity: [] for f in imported.findings}
    for f in imported.findings:
        by[f.severity].append(str(f))
    assert len(by["error"]) == 1 and by["error"][0].startswith(f"{configs}:103: error E202: arch=10.0:")
    assert "raises (KeyError in configs[world_size]) at world sizes 3, 5-7" in by["error"][0]
    assert any("arch=10.7: 10.7 = 10.0 in 3 of 3 world sizes: measured, or inherited?" in m for m in by["warning"])
    assert any("at world size 4, where num_mc_blocks is None" in m for m in by["warning"])
    assert any("16MiB default workspace" in m and "at 10.0 ws 2, 4, 8" in m for m in by["warning"])
    assert [m for m in by["note"] if "arch=9.0, 10.3, 12.0: no configs of their own" in m]
    # no custom_all_reduce.py beside it: SGLang's choice of class is assumed, and said so
    assert [m for m in by["note"] if "S107" in m and "no custom_all_reduce.py beside CustomAllReduceV2" in m]
    assert len(imported.findings) == 6  # one line per problem


def test_sglang_reads_a_wheels_layout_as_a_checkouts(tmp_path: Path) -> None:
    shutil.copytree(FIXTURES / "sglang-pick" / "python", tmp_path, dirs_exist_ok=True)
    wheel = read_engine("sglang", str(tmp_path)).tables
    checkout = read_engine("sglang", str(FIXTURES / "sglang-pick")).tables
    assert wheel.tables["10.0"].plans == checkout.tables["10.0"].plans


def test_sglang_a_dispatch_artune_cannot_follow_is_read_on_and_named(tmp_path: Path, capsys) -> None:
    """New code in the engine's own file is no exit 2: the reading names the function, the line, what it met and
    what it assumed there, for the world sizes it could touch, and reads everything else."""
    from artune.cli import main
    from artune.table.types import CaveatKind

    root = _copy(tmp_path, "sglang-pick")
    communicator = root / PICK / "custom_all_reduce_v2.py"
    _edit(
        communicator,
        "        if nbytes <= h.push_limit:\n",
        "        while h.push_limit:\n            pass\n        if 0:\n",
    )
    table = read_engine("sglang", str(root)).tables.resolve("10.0")
    (caveat,) = [c for c in table.caveats if c.kind is CaveatKind.UNEVALUATED]
    assert caveat.function == "CustomAllReduceV2._pick_config" and caveat.where.startswith(f"{communicator}:")
    assert "'while h.push_limit:' not evaluated" in caveat.detail and caveat.assumed == "the statement has no effect"
    assert caveat.world_sizes == (2, 4, 8)  # where v2 is built and its dispatch runs
    assert decide(table, 64 * KB, 8, "graph").algorithm == "1shot_push"  # the rest read as the file now says
    assert main(["check", f"sglang:{root}"]) == 1
    out = capsys.readouterr().out
    assert f"{communicator}:{caveat.where.rsplit(':', 1)[1]}: warning E401:" in out
    assert "artune assumed the statement has no effect" in out
    explain = ["explain", "--table", f"sglang:{root}", "--arch", "10.0", "--mode", "graph", "--size", "64KiB"]
    assert main([*explain, "--world-size", "8"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("1shot_push") and "unverified" in out.splitlines()[0]
    assert "- unverified: CustomAllReduceV2._pick_config (" in out
    assert main([*explain, "--world-size", "3"]) == 0  # a world size the caveat does not touch
    assert "not evaluated" not in capsys.readouterr().out  # (the fixture's functions, unfamiliar, still are)

    root = _copy(tmp_path / "b", "sglang-pick")
    _edit(root / PICK / "custom_all_reduce_v2.py", "AllReduceAlgo.TWO_SHOT_PUSH)", "AllReduceAlgo.THREE_SHOT)")
    table = read_engine("sglang", str(root)).tables.resolve("10.0")
    (caveat,) = [c for c in table.caveats if c.kind is CaveatKind.UNEVALUATED]
    assert "THREE_SHOT" in caveat.detail and "not one of SGLang's algorithms" in caveat.detail
    assert caveat.assumed == "nccl runs (artune has no name for it)"
    assert decide(table, 64 * KB, 8, "graph").algorithm == "nccl"


def test_pyeval_records_have_methods_and_properties_and_namespaces_take_attributes() -> None:
    from artune.errors import OutsideCall
    from artune.formats.pyeval import Namespace

    source = (
        "from typing import NamedTuple\nfrom outside import far\n"
        "class R(NamedTuple):\n    lo: int\n    hi: int\n"
        "    def contains(self, n):\n        return self.lo <= n <= self.hi\n"
        "    @property\n    def width(self):\n        return self.hi - self.lo\n"
        "def setup(me, n):\n    me.size = n * 2\n    me.r = R(1, n)\n    far()\n    me.never = 1\n"
        "def ask(me, n):\n    return me.r.contains(n) and me.r.width\n"
    )
    interp = Interpreter(source, "t.py")
    interp.run_module()
    me = Namespace("me")
    assert interp.run_until_outside(interp.globals.values["setup"], [me, 8]) == ("stopped", 14, "outside.far")
    assert me.values["size"] == 16 and "never" not in me.values
    assert interp.call(interp.globals.values["ask"], [me, 3], {}) == 7
    assert interp.call(interp.globals.values["ask"], [me, 9], {}) is False
    with pytest.raises(OutsideCall, match=r"t.py:14: calls 'outside.far'"):
        interp.call(interp.globals.values["setup"], [Namespace("other"), 1], {})
