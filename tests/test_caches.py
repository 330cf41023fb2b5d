"""artune's caches: one root that the user's settings name, and readings kept under a key that holds everything
that changes them (a reading made by another Python, artune or evaluator is never used)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from artune.formats import fingerprints
from artune.formats.files import SourceFile
from artune.formats.releases import releases_dir
from artune.formats.vllm import memo
from artune.settings import cache_root, from_env


def test_every_cache_is_under_the_root_the_environment_names(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("ARTUNE_CACHE_DIR", "XDG_CACHE_HOME", "ARTUNE_RELEASES_DIR", "ARTUNE_READINGS_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_root() == tmp_path / "home" / ".cache" / "artune"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root() == tmp_path / "xdg" / "artune"
    monkeypatch.setenv("ARTUNE_CACHE_DIR", str(tmp_path / "mine"))  # wins over XDG_CACHE_HOME
    mine = tmp_path / "mine"
    assert (cache_root(), from_env().cache_dir) == (mine, mine)
    assert (releases_dir(), memo.readings_dir()) == (mine / "releases", mine / "readings")
    monkeypatch.setenv("ARTUNE_RELEASES_DIR", str(tmp_path / "wheels"))  # each folder may still be moved alone
    monkeypatch.setenv("ARTUNE_READINGS_DIR", str(tmp_path / "kept"))
    assert (releases_dir(), memo.readings_dir()) == (tmp_path / "wheels", tmp_path / "kept")
    assert cache_root({"XDG_CACHE_HOME": "/x"}) == Path("/x/artune")  # an explicit environment, as from_env's


def test_the_suite_reads_a_cache_of_its_own() -> None:
    assert Path(cache_root()).name.startswith("artune-test-cache-")  # tests/conftest.py
    assert memo.readings_dir().parent == cache_root()


def test_a_reading_is_kept_under_the_interpreter_artune_and_the_code_that_made_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    files = [SourceFile("vllm/envs.py", "x = 1\n")]
    kept = memo.name(files, {"arch": "9.0"})
    assert memo.name(files, {"arch": "9.0"}) == kept
    assert memo.name(files, {"arch": "10.0"}) != kept
    assert memo.name([SourceFile("vllm/envs.py", "x = 2\n")], {"arch": "9.0"}) != kept
    with monkeypatch.context() as patch:  # the same tree read by another Python (3.12 prints its trees otherwise)
        patch.setattr(sys, "version", "3.12.1 (main, Jan  1 2024, 00:00:00) [GCC 12.2.0]")
        assert memo.name(files, {"arch": "9.0"}) != kept
    with monkeypatch.context() as patch:
        patch.setattr(memo, "__version__", "0.0.0")
        assert memo.name(files, {"arch": "9.0"}) != kept
    source = memo._evaluator_source()
    pyeval = Path(memo.__file__).parent.parent / "pyeval"
    for module in [fingerprints.__file__, memo.__file__, *pyeval.glob("*.py")]:
        assert Path(module).read_bytes() in source, f"{module} changes a reading but not its key"
