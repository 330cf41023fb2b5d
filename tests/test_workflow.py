"""The documented CI workflow (docs/ci/artune-review.yml) as GitHub and its security linter expect it.

tests/test_review.py runs the workflow's artune commands; this file checks the rest: actions pinned by commit,
no credentials left in the checkout, upload-sarif's current major, no placeholder, the fork case, and zizmor
(the GitHub Actions linter on PyPI, ``pip install zizmor``) finding nothing in it.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

WORKFLOW = Path(__file__).parent.parent / "docs" / "ci" / "artune-review.yml"


def _zizmor() -> str | None:
    """The zizmor beside this interpreter (the test extra installs it) or on PATH."""
    beside = Path(sys.executable).parent / "zizmor"
    return str(beside) if beside.is_file() else shutil.which("zizmor")


def test_actions_are_pinned_by_commit_with_their_tag_and_upload_sarif_is_v4() -> None:
    text = WORKFLOW.read_text()
    uses = re.findall(r"^\s*-?\s*uses:\s*(\S+)(.*)$", text, re.M)
    assert {name.split("@")[0] for name, _ in uses} == {
        "actions/checkout",
        "actions/setup-python",
        "github/codeql-action/upload-sarif",
    }
    for name, comment in uses:
        assert re.fullmatch(r"[\w./-]+@[0-9a-f]{40}", name), f"{name}: pin a full commit SHA, not a tag"
        assert re.fullmatch(r"\s*# v\d+(\.\d+)*", comment), f"{name}: say the release tag in a comment"
    (upload,) = [comment for name, comment in uses if name.startswith("github/codeql-action/upload-sarif@")]
    assert upload.strip().startswith("# v4.")  # v3 is retired


def test_the_checkout_keeps_no_credentials_and_nothing_is_left_to_fill_in() -> None:
    job = yaml.safe_load(WORKFLOW.read_text())["jobs"]["review"]
    (checkout,) = [s for s in job["steps"] if str(s.get("uses", "")).startswith("actions/checkout@")]
    assert checkout["with"]["persist-credentials"] is False
    assert not re.search(r"\bOWNER\b|\bTODO\b|example\.com|<[a-z-]+>", WORKFLOW.read_text().replace("<!--", ""))


def test_forks_run_on_pull_request_with_the_writes_skipped_and_the_reason_given() -> None:
    text = WORKFLOW.read_text()
    on = yaml.safe_load(text)[True]  # YAML 1.1 reads the key `on` as True
    assert set(on) == {"pull_request"}
    assert "pull_request_target" in text and "pwn request" in text  # why not the other trigger, said
    job = yaml.safe_load(text)["jobs"]["review"]
    writes = [s for s in job["steps"] if "upload-sarif" in str(s.get("uses", "")) or "gh api" in s.get("run", "")]
    assert len(writes) == 2 and all(s.get("if") == "env.SAME_REPO == 'true'" for s in writes)
    assert job["env"]["SAME_REPO"] == "${{ github.event.pull_request.head.repo.full_name == github.repository }}"


def test_zizmor_finds_nothing_in_the_workflow() -> None:
    zizmor = _zizmor()
    if zizmor is None:
        pytest.skip("zizmor is not installed (pip install zizmor, or the test extra): the workflow is not linted")
    done = subprocess.run(
        [zizmor, "--offline", "--persona=pedantic", "--no-progress", str(WORKFLOW)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "No findings to report" in done.stdout + done.stderr
