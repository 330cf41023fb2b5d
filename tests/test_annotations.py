"""Findings where the diff is: ``check`` and ``review`` as GitHub workflow annotations and as SARIF 2.1.0.

The SARIF is validated against the SARIF 2.1.0 JSON schema (tests/fixtures/sarif, its repository and commit
named there); the E101 annotation is checked against the line of vLLM 0.27.0's released file that holds the
"10.7" row.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from jsonschema import Draft4Validator

from artune.cli import main
from artune.findings import KINDS
from artune.formats.releases import ReleaseUnavailable, fetch_release
from artune.review import annotations
from artune.review.annotations import checkout_path, github, sarif
from artune.review.types import Question

SCHEMA = json.loads((Path(__file__).parent / "fixtures" / "sarif" / "sarif-schema-2.1.0.json").read_text())
UTILS = "vllm/distributed/device_communicators/all_reduce_utils.py"


def valid(log: dict) -> dict:
    Draft4Validator.check_schema(SCHEMA)
    errors = sorted(Draft4Validator(SCHEMA).iter_errors(log), key=lambda e: list(e.path))
    assert not errors, "; ".join(f"{list(e.path)}: {e.message}" for e in errors[:5])
    return log


def release(engine: str, version: str) -> Path:
    try:
        return fetch_release(engine, version)
    except ReleaseUnavailable as err:
        pytest.skip(f"{engine}=={version} cannot be had here: {err}")


def test_e101_annotated_at_the_line_that_holds_the_10_7_row(capsys: pytest.CaptureFixture[str]) -> None:
    root = release("vllm", "0.27.0")
    assert main(["check", "vllm==0.27.0", "--output-format", "github"]) == 1
    out = capsys.readouterr().out.splitlines()
    (e101,) = [line for line in out if ",title=E101::" in line]
    assert e101.startswith(f"::warning file={UTILS},line=")
    line = int(e101.split(",line=", 1)[1].split(",", 1)[0])
    source = (root / UTILS).read_text().splitlines()
    assert source[line - 1].lstrip().startswith('"10.7": {'), source[line - 1]  # the released file's own line
    assert "::arch 10.7: 10.7 = 10.3 in 3 of 3 tables: measured, or inherited?" in e101
    *annotated, count = out
    assert all(line.startswith(("::warning ", "::notice ", "::error ")) for line in annotated)
    assert count == f"artune: printed {len(annotated)} of {len(annotated)} annotations"
    assert not any(",title=E402::" in line for line in annotated)  # every function as verified, on every Python
    assert any(line.startswith("::notice ") and ",title=N101::" in line for line in out)  # notes are notices


def test_check_sarif_validates_with_one_rule_per_code(capsys: pytest.CaptureFixture[str]) -> None:
    release("vllm", "0.27.0")
    assert main(["check", "vllm==0.27.0", "--output-format", "sarif"]) == 1
    log = valid(json.loads(capsys.readouterr().out))
    (run,) = log["runs"]
    rules = run["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == list(KINDS)
    e101 = rules[list(KINDS).index("E101")]
    kind = KINDS["E101"]
    assert (e101["shortDescription"]["text"], e101["fullDescription"]["text"]) == (kind.title, kind.meaning)
    assert e101["help"]["text"] == kind.fix and "docs/findings.md#e101" in e101["help"]["markdown"]
    (result,) = [r for r in run["results"] if r["ruleId"] == "E101"]
    assert rules[result["ruleIndex"]]["id"] == "E101" and result["level"] == "warning"
    (location,) = result["locations"]
    assert location["physicalLocation"]["artifactLocation"]["uri"] == UTILS
    assert location["physicalLocation"]["region"]["startLine"] >= 1
    assert {r["level"] for r in run["results"]} == {"warning", "note"}


def test_help_uri_where_the_package_names_its_documentation(monkeypatch: pytest.MonkeyPatch) -> None:
    """helpUri is absolute or absent: the docs page the package names (its Documentation URL), never made up."""
    question = Question("warning", "t.toml", "x86_64", "ws 2 (eager)", "band covers no size", "T101", (2,), ("eager",))
    if annotations.docs_url() is None:  # this package names no Documentation URL: no helpUri, no made-up one
        assert "helpUri" not in valid(sarif([question]))["runs"][0]["tool"]["driver"]["rules"][0]
    monkeypatch.setattr(annotations, "docs_url", lambda: "https://docs.example.org/artune/findings/")
    log = valid(sarif([question]))
    rule = log["runs"][0]["tool"]["driver"]["rules"][0]
    assert rule["helpUri"] == "https://docs.example.org/artune/findings/#t101"
    assert log["runs"][0]["tool"]["driver"]["informationUri"] == "https://docs.example.org/artune/"


def test_review_sarif_and_annotations_of_its_ranked_questions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from test_review import _SIZES, rubin_change, write_vllm

    a, b = write_vllm(tmp_path / "a", _SIZES), write_vllm(tmp_path / "b", rubin_change())
    assert main(["review", f"vllm:{a}", f"vllm:{b}", "--output-format", "sarif"]) == 1
    log = valid(json.loads(capsys.readouterr().out))
    results = log["runs"][0]["results"]
    assert [r["ruleId"] for r in results][:1] == ["E101"]
    assert results[0]["locations"][0]["physicalLocation"]["region"]["startLine"] >= 1
    (x111,) = [r for r in results if r["ruleId"] == "X111"]  # a move has no line of its own: the table's file
    assert x111["locations"] == [{"physicalLocation": {"artifactLocation": {"uri": str(b / UTILS)}}}]
    assert main(["review", f"vllm:{a}", f"vllm:{b}", "--format", "github"]) == 1  # --format: the alias
    out = capsys.readouterr().out.splitlines()
    assert len(out) == len(results) + 1 and out[0].startswith("::warning file=") and ",title=E101::" in out[0]
    assert any(line.startswith("::warning title=X111::") for line in out)  # no file: the run's summary shows it
    assert "%0AAnswer: artune tune --device cuda" in out[0]  # the command that answers it, on its own line


def test_check_json_and_text_keep_every_field(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "reference:vllm"]) == 1
    text = capsys.readouterr().out.splitlines()
    assert main(["check", "reference:vllm", "--format", "json"]) == 1
    rows = json.loads(capsys.readouterr().out)
    assert [r["text"] for r in rows] == text
    assert {"code", "severity", "arch", "message", "file", "line"} <= set(rows[0])
    assert all(r["file"] is None for r in rows)  # a bundled reference is no file of a checkout


def test_escaping_as_the_actions_toolkit_does() -> None:
    question = Question("error", "dir,x/f.py:3", "10.0", "", "50% done\r\nnext: a, b", "E202")
    line, _count = github([question]).splitlines()
    assert line == "::error file=dir%2Cx/f.py,line=3,title=E202::arch 10.0: 50%25 done%0D%0Anext: a, b"
    note = Question("note", "", "*", "", "information", "M101")
    assert github([note]) == "::notice title=M101::every arch: information\nartune: printed 1 of 1 annotations\n"


def test_annotations_that_matter_come_first_and_the_count_says_what_github_leaves_out() -> None:
    """GitHub shows 10 annotations of each level per step: errors, then warnings, then notices, each in rank order."""
    asked = [Question("note", "f.py:1", "9.0", "", f"n{i}", "N101") for i in range(12)]
    asked += [Question("warning", "f.py:2", "9.0", "", f"w{i}", "X111") for i in range(13)]
    asked.insert(5, Question("error", "f.py:3", "9.0", "", "e0", "E202"))
    asked.append(Question("error", "", "9.0", "", "e1", "E202"))
    *lines, count = github(asked).splitlines()
    levels = [line.split(" ", 1)[0] for line in lines]
    assert levels == ["::error"] * 2 + ["::warning"] * annotations.LIMIT + ["::notice"] * annotations.LIMIT
    assert [line.rsplit(": ", 1)[1] for line in lines[:3]] == ["e0", "e1", "w0"]  # each level in the order given
    assert lines[-1].endswith("n9")
    assert count.startswith("artune: printed 22 of 27 annotations (GitHub shows 10 of each level per step")


def test_the_review_of_a_release_validates_and_every_result_has_a_location(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """What code scanning's upload-sarif is given: a result without a location is refused (X111, X113 had none)."""
    release("vllm", "0.26.0")
    release("vllm", "0.27.0")
    assert main(["review", "vllm==0.26.0", "vllm==0.27.0", "--output-format", "sarif"]) == 1
    (run,) = valid(json.loads(capsys.readouterr().out))["runs"]
    codes = [r["ruleId"] for r in run["results"]]
    assert "E402" not in codes and "X111" in codes
    for result in run["results"]:
        (location,) = result["locations"]
        uri = location["physicalLocation"]["artifactLocation"]["uri"]
        assert uri.startswith("vllm/") and ":" not in uri, result  # a path in the engine's checkout


def test_checkout_paths() -> None:
    assert checkout_path(f"vllm==0.27.0/{UTILS}:50") == (UTILS, 50)
    assert checkout_path("sglang==0.5.19/sglang/srt/x.py:1") == ("sglang/srt/x.py", 1)
    assert checkout_path("reference:vllm") == ("", None)
    assert checkout_path("origin/main:vllm/x.py:3") == ("", None)  # a revision's file is not the checkout's
    assert checkout_path("tables/t.toml") == ("tables/t.toml", None)
    here = Path.cwd()
    assert checkout_path(f"{here}/vllm/x.py:9", here) == ("vllm/x.py", 9)
    assert checkout_path("/elsewhere/vllm/x.py:9", here / "sub") == ("/elsewhere/vllm/x.py", 9)


def test_a_question_with_no_place_is_located_at_the_table_file_of_the_side_it_is_about(tmp_path: Path) -> None:
    from artune.review.annotations import table_file

    loss = Question("warning", "", "10.7", "ws 8 (graph)", "the cost model predicts AFTER slower", "X113", (8,))
    (result,) = valid(sarif([loss], about=table_file("vllm==0.27.0")))["runs"][0]["results"]
    assert result["locations"] == [{"physicalLocation": {"artifactLocation": {"uri": UTILS}}}]  # no line: none is
    configs = "sglang/srt/distributed/device_communicators/configs/custom_all_reduce_v2.py"
    assert table_file("sglang==0.5.23") == f"sglang==0.5.23/{configs}"
    (tmp_path / "python" / configs).parent.mkdir(parents=True)
    (tmp_path / "python" / configs).write_text("")
    assert table_file(f"sglang:{tmp_path}") == str(tmp_path / "python" / configs)  # a checkout's layout
    assert table_file(f"vllm:{tmp_path / 'python' / configs}") == str(tmp_path / "python" / configs)  # a file
    assert table_file("trtllm:.") == "cpp/tensorrt_llm/common/customAllReduceUtils.h"
    assert table_file("reference:vllm") == table_file("t.toml") == ""  # no engine's file: no place
