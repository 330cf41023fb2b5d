"""The error tree as a user meets it: which errors are bad input, and what the command line exits with."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from artune.cli import main
from artune.errors import ArtuneError, ReleaseUnavailable, SourceUnavailable, TableError


def test_a_download_failure_is_not_a_malformed_table() -> None:
    assert issubclass(ReleaseUnavailable, SourceUnavailable) and issubclass(SourceUnavailable, ArtuneError)
    assert not issubclass(ReleaseUnavailable, TableError)


@pytest.fixture
def offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No release cached and no registry: pip looks in an empty folder only."""
    monkeypatch.setenv("ARTUNE_RELEASES_DIR", str(tmp_path / "releases"))
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    (tmp_path / "wheels").mkdir()
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "wheels"))
    return tmp_path


def test_a_release_that_cannot_be_downloaded_exits_3_naming_it(
    offline: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["explain", "--table", "vllm==0.33.0", "--world-size", "2", "--size", "1KiB"]) == 3
    err = capsys.readouterr().err
    assert "vllm==0.33.0: cannot download the wheel" in err and "Traceback" not in err
    assert not list((offline / "releases").glob("vllm-*"))  # nothing that looks complete is left


def test_check_exits_3_only_when_every_unreadable_source_could_not_be_downloaded(
    offline: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["check", "sglang==0.5.23"]) == 3
    malformed = offline / "bad.toml"
    malformed.write_text("this is not = = toml\n")
    assert main(["check", "sglang==0.5.23", str(malformed)]) == 2  # bad input is the one to fix first
    err = capsys.readouterr().err
    assert "sglang==0.5.23: cannot download the wheel" in err and "bad.toml" in err
