"""A fourth engine is one folder and one registry line: the toy engine (``tests/toy_engine``) through every command.

Nothing of the toy is in artune: it is registered here, as a package outside
artune would be, and each command answers for it from its own table file.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

import toy_engine
from artune.cli import main
from artune.errors import TableError
from artune.formats import ENGINES, READERS, engine_reader
from artune.formats.registry import WRITABLE, names, register, unregister

CHECKOUT = Path(toy_engine.__file__).parent / "checkout"
TOY = f"toy:{CHECKOUT}"


@pytest.fixture(autouse=True)
def toy() -> Iterator[None]:
    register(toy_engine.ENGINE)
    yield
    unregister("toy")


@pytest.fixture
def changed(tmp_path: Path) -> str:
    """The toy checkout with one line moved: world size 2 on 9.0 runs custom_ar up to 256 KiB, not 64 KiB."""
    shutil.copytree(CHECKOUT, tmp_path / "after")
    file = tmp_path / "after" / toy_engine.FILE
    file.write_text(file.read_text().replace("9.0     2           64KiB", "9.0     2           256KiB"))
    return f"toy:{tmp_path / 'after'}"


def test_a_registered_engine_is_in_every_view_of_the_registry() -> None:
    assert "toy" in ENGINES and "toy" in READERS and "toy" in WRITABLE and "toy" in names()
    assert engine_reader("toy") is toy_engine.ENGINE
    unregister("toy")
    assert "toy" not in ENGINES
    with pytest.raises(TableError, match=r"toy: unknown engine; known: vllm, sglang, trtllm$"):
        engine_reader("toy")


def test_show_draws_the_toy_s_tables(capsys) -> None:
    assert main(["show", TOY]) == 0
    out = capsys.readouterr().out
    assert "arch=9.0" in out and "arch=10.0" in out
    assert "(64KiB, 8MiB] symm_mem_one_shot" in out


def test_check_lints_the_toy_s_tables(capsys) -> None:
    assert main(["check", TOY, "--format", "json"]) == 1
    found = json.loads(capsys.readouterr().out)
    assert {(f["code"], f["arch"]) for f in found} == {("T201", "9.0")}  # world size 3 has no line


def test_explain_answers_from_the_toy_s_file(capsys) -> None:
    argv = ["explain", "--table", TOY, "--arch", "9.0", "--world-size", "2", "--mode", "graph"]
    assert main([*argv, "--size", "1MiB"]) == 0
    assert capsys.readouterr().out.startswith("symm_mem_one_shot")
    assert main([*argv, "--size", "32KiB"]) == 0
    assert capsys.readouterr().out.startswith("custom_ar")


def test_explain_env_says_the_toy_reads_no_switches(capsys) -> None:
    argv = ["explain", "--table", TOY, "--arch", "9.0", "--world-size", "2", "--size", "1MiB", "--env", "A=1"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "--env sets a vLLM release's switches" in err and "toy" not in err.split("give --table")[1]


def test_diff_finds_the_moved_line(changed: str, capsys) -> None:
    assert main(["diff", TOY, changed, "--arch", "9.0", "--world-size", "2", "--mode", "graph"]) == 1
    out = capsys.readouterr().out
    assert "(64KiB, 256KiB]: A symm_mem_one_shot > nccl | B custom_ar > symm_mem_one_shot > nccl" in out


def test_review_asks_about_the_moved_line(changed: str, capsys) -> None:
    assert main(["review", TOY, changed, "--output-format", "json"]) == 1
    review = json.loads(capsys.readouterr().out)
    assert review["verdict"] != "approve"
    moved = json.dumps(review["moves"])
    assert "custom_ar" in moved and "9.0" in moved


def test_export_writes_the_toy_s_format_back(tmp_path: Path, capsys) -> None:
    assert main(["export", f"{TOY}@10.0", "--to", "toy"]) == 0
    written = capsys.readouterr().out
    assert "10.0 2 1MiB custom_ar" in written.splitlines()
    (tmp_path / toy_engine.FILE).write_text(written)
    assert main(["diff", TOY + "@10.0", f"toy:{tmp_path}@10.0"]) == 0  # read back, it decides the same


def test_verify_engine_runs_the_toy_s_own_dispatch(capsys) -> None:
    assert main(["verify-engine", TOY]) == 0
    out = capsys.readouterr().out
    assert "executes the toy engine's own dispatch" in out
    assert "153 probes, 153 agree" in out


def test_verify_engine_sees_a_reading_that_differs(monkeypatch, capsys) -> None:
    """The oracle is no mirror of the reader: an engine whose code runs nccl everywhere differs."""
    monkeypatch.setattr(toy_engine, "dispatch", lambda *args: "nccl")
    assert main(["verify-engine", TOY]) == 1
    assert "differs:" in capsys.readouterr().out


def test_an_unknown_engine_is_named_with_the_known_ones(capsys) -> None:
    with pytest.raises(SystemExit, match="2"):
        main(["export", "bundled:cpu", "--to", "nope"])
    assert (
        "invalid choice: 'nope' (choose from 'vllm', 'sglang', 'nccl-tuner', 'trtllm', 'toy')"
        in capsys.readouterr().err
    )


def test_review_base_reads_the_toy_s_files_from_git(changed: str, capsys) -> None:
    """``review ENGINE:PATH --base REV`` takes the files the engine's plugin names from git."""
    import subprocess

    tree = changed.removeprefix("toy:")
    before = (CHECKOUT / toy_engine.FILE).read_text()
    after = (Path(tree) / toy_engine.FILE).read_text()
    (Path(tree) / toy_engine.FILE).write_text(before)
    git = ["git", "-C", tree, "-c", "user.name=t", "-c", "user.email=t@t"]
    for args in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "before"]):
        subprocess.run([*git, *args], check=True, timeout=60)
    (Path(tree) / toy_engine.FILE).write_text(after)
    assert main(["review", changed, "--base", "HEAD", "--output-format", "json"]) == 1
    review = json.loads(capsys.readouterr().out)
    assert "custom_ar" in json.dumps(review["moves"])


def _installed(folder: Path, point: str) -> None:
    """A package's metadata in ``folder`` declaring ``point`` in the ``artune.engines`` group, as pip installs it."""
    info = folder / "toy_plugin-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[artune.engines]\n{point}\n")


def test_an_installed_package_adds_an_engine_by_entry_point(tmp_path: Path, monkeypatch, capsys) -> None:
    unregister("toy")
    assert "toy" not in names()
    _installed(tmp_path, "toy = toy_engine:ENGINE")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert "toy" in names() and engine_reader("toy") is toy_engine.ENGINE
    assert main(["explain", "--table", TOY, "--arch", "10.0", "--world-size", "2", "--size", "4KiB"]) == 0
    assert capsys.readouterr().out.startswith("custom_ar")


def test_an_entry_point_that_is_no_engine_is_named_with_the_fix(tmp_path: Path, monkeypatch) -> None:
    unregister("toy")
    _installed(tmp_path, "toy = toy_engine:FILE")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(TableError, match=r"entry point toy = toy_engine:FILE \(artune.engines\) is no EnginePlugin"):
        engine_reader("toy")


def test_review_annotations_point_at_the_toy_s_table_file(changed: str, capsys) -> None:
    """A question with no file of its own is placed at the engine's table file (``EnginePlugin.table_file``)."""
    assert main(["review", TOY, changed, "--output-format", "sarif"]) == 1
    log = json.loads(capsys.readouterr().out)
    places = {
        loc["physicalLocation"]["artifactLocation"]["uri"] for r in log["runs"][0]["results"] for loc in r["locations"]
    }
    assert places and all(p.endswith(toy_engine.FILE) for p in places)
