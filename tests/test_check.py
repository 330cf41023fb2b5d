"""``artune check``: each lint on a small hand-written table, and the command's exit codes."""

from __future__ import annotations

from pathlib import Path

import pytest

from artune.cli import main
from artune.table import check_table, loads_table

HEADER = """
schema = 1
[platform]
kind = "cpu"
arch = "x86_64"
[provenance]
source = "measured"
date = "2026-11-29"
"""

CLEAN = (
    HEADER
    + """
[[plan]]
world_size = 2
fallback = "gloo"
bands = [{ below = "1MiB", algorithm = "shm_one_shot" }, { upto = "1GiB", algorithm = "shm_two_shot" }]
[[plan]]
world_size = 3
fallback = "gloo"
bands = [{ upto = "64KiB", algorithm = ["shm_one_shot", "gloo"] }]
"""
)


def findings(text: str, **kw: object) -> list[str]:
    return [str(f) for f in check_table(loads_table(text, "t.toml"), **kw)]


def test_clean_table_has_no_findings() -> None:
    assert findings(CLEAN) == []


def test_out_of_order_bands() -> None:
    text = CLEAN.replace('{ below = "1MiB"', '{ upto = "2GiB"')
    (line,) = findings(text)
    assert line.startswith("t.toml: warning T101: arch=x86_64 ws=2 mode=eager: band 2")
    assert "out of order" in line


def test_unknown_algorithm_and_params() -> None:
    text = CLEAN.replace('algorithm = "shm_two_shot"', 'algorithm = "shm_three_shot"')
    text += '\nparams = { "warp_drive" = { blocks = 1 } }\n'
    lines = findings(text)
    assert any("unknown algorithm 'shm_three_shot'" in line for line in lines)
    assert any("params for unknown algorithm 'warp_drive'" in line for line in lines)


def test_missing_required_parameter() -> None:
    text = HEADER.replace('"cpu"', '"cuda"').replace("x86_64", "10.7") + (
        '[[plan]]\nworld_size = 2\nmode = "graph"\nfallback = "nccl"\n'
        'bands = [{ upto = "1MiB", algorithm = "1shot_push" }]\n'
    )
    assert any("1shot_push needs parameter 'blocks'" in line for line in findings(text))


def test_world_size_holes_and_max_world_size() -> None:
    text = CLEAN.replace("world_size = 3", "world_size = 5")
    assert any("no plan for world sizes 3-4 (up to 5)" in line for line in findings(text))
    assert any("no plan for world sizes 4-8 (up to 8)" in line for line in findings(CLEAN, max_world_size=8))


def test_mode_missing_for_some_world_sizes() -> None:
    text = HEADER.replace('"cpu"', '"cuda"').replace("x86_64", "9.0") + "".join(
        f'[[plan]]\nworld_size = {ws}\nmode = "{mode}"\nfallback = "nccl"\n'
        for ws, mode in ((2, "graph"), (2, "eager"), (3, "eager"))
    )
    assert any("mode=graph missing for world sizes 3" in line for line in findings(text))


def test_engine_conditions_and_cpu_graph_mode() -> None:
    text = CLEAN.replace("world_size = 3\n", 'world_size = 3\nmode = "graph"\n')
    assert any("mode 'graph' on a CPU table" in line for line in findings(text))
    # AITER's world sizes are a stand-in's fact (its library is not read); vLLM's own paths have none here:
    # the release's code decides them
    gpu = HEADER.replace('"cpu"', '"rocm"').replace("x86_64", "gfx942") + (
        '[[plan]]\nworld_size = 2\nfallback = "rccl"\nbands = [{ upto = "1MiB", algorithm = "aiter_ar" }]\n'
        '[[plan]]\nworld_size = 3\nfallback = "rccl"\nbands = [{ upto = "1MiB", algorithm = "aiter_ar" }]\n'
    )
    assert findings(gpu) == [
        "t.toml: warning T105: arch=gfx942 ws=3 mode=eager: aiter_ar never runs at world_size=3 (only [2, 4, 6, 8])"
    ]


def test_inherited_figures() -> None:
    text = CLEAN.replace('source = "measured"', 'source = "inherited"\ninherited_from = "10.3"')
    assert any("inherited from arch 10.3" in line for line in findings(text))


def test_command_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    clean = tmp_path / "clean.toml"
    clean.write_text(CLEAN)
    assert main(["check", str(clean)]) == 0
    dirty = tmp_path / "dirty.toml"
    dirty.write_text(CLEAN.replace("shm_two_shot", "shm_nine_shot"))
    assert main(["check", str(dirty)]) == 1
    assert f"{dirty}: warning T103: arch=x86_64 ws=2 mode=eager: unknown algorithm" in capsys.readouterr().out
    broken = tmp_path / "broken.toml"
    broken.write_text(CLEAN.replace("world_size = 2", 'world_size = "two"'))
    assert main(["check", str(broken)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"artune check: error: {broken}: plan 1: world_size must be an integer, got 'two'"]
    assert main(["check", str(tmp_path / "missing.toml")]) == 2
    assert "cannot read" in capsys.readouterr().err
