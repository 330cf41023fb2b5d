"""Finding codes: every finding carries one, every code has its entry and docs, --select and --ignore filter."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from artune.cli import main
from artune.errors import ArtuneError
from artune.findings import KINDS, PREFIXES, markdown, parse_codes, selected
from artune.formats import read_engine
from artune.sources import open_source, source_findings
from artune.table.check import Finding

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "engines"
CODE = re.compile(rf"[{''.join(PREFIXES)}][0-9]{{3}}")

# a CPU table with something of each kind artune's own lints find
DIRTY = """
schema = 1
[platform]
kind = "cpu"
arch = "x86_64"
[provenance]
source = "inherited"
inherited_from = "x86_64-other"
[[plan]]
world_size = 2
mode = "graph"
fallback = "gloo"
bands = [
  { upto = "1MiB", algorithm = ["shm_one_shot", "shm_one_shot"] },
  { upto = "4KiB", algorithm = "shm_3shot" },
]
params = { "nope" = { chunk_bytes = 4096 } }
[[plan]]
world_size = 4
mode = "eager"
hosts = 2
fallback = "gloo"
bands = [{ upto = "inf", algorithm = "shm_one_shot" }]
"""

# a GPU table with holes: world sizes without a plan, a mode missing, an algorithm at a world size it never runs at
HOLES = """
schema = 1
[platform]
kind = "cuda"
arch = "9.0"
[provenance]
source = "measured"
[[plan]]
world_size = 3
mode = "graph"
fallback = "nccl"
bands = [{ upto = "1MiB", algorithm = "quick_ar_int3" }, { upto = "8MiB", algorithm = "1shot_push" }]
[[plan]]
world_size = 8
mode = "eager"
fallback = "nccl"
bands = [{ upto = "1MiB", algorithm = "custom_ar" }]
"""


def _codes_in_src() -> set[str]:
    """Every string constant in src/ that is a finding code, outside the registry itself."""
    found: set[str] = set()
    for path in (ROOT / "src" / "artune").rglob("*.py"):
        if path.name == "findings.py" and path.parent.name == "artune":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and CODE.fullmatch(node.value):
                found.add(node.value)
    return found


def test_every_code_used_has_an_entry_and_every_entry_is_used() -> None:
    used = _codes_in_src()
    assert used - set(KINDS) == set(), "codes without an entry in artune.findings.KINDS"
    assert set(KINDS) - used == set(), "entries in artune.findings.KINDS that no finding uses"


def test_the_docs_page_is_generated_from_the_registry() -> None:
    page = (ROOT / "docs" / "findings.md").read_text(encoding="utf-8")
    assert page == markdown(), "docs/findings.md is stale: python -m artune.findings > docs/findings.md"
    for code in KINDS:
        assert f"### {code}: {KINDS[code].title} {{#{code.lower()}}}\n" in page


def test_an_unregistered_code_is_refused() -> None:
    with pytest.raises(ValueError, match="Z999"):
        Finding("t", "x86_64", "message", code="Z999")


def test_a_code_is_required() -> None:
    with pytest.raises(TypeError, match="code"):
        Finding("t", "x86_64", "message")  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="''"):
        Finding("t", "x86_64", "message", code="")


def test_every_finding_made_in_src_names_its_code() -> None:
    """Each ``Finding(...)`` in src/ passes ``code=``, and a literal one is in the registry."""
    calls = 0
    for path in (ROOT / "src" / "artune").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Finding":
                calls += 1
                code = next((k.value for k in node.keywords if k.arg == "code"), None)
                assert code is not None, f"{path.relative_to(ROOT)}:{node.lineno}: Finding(...) without code="
                if isinstance(code, ast.Constant):
                    assert code.value in KINDS, f"{path.relative_to(ROOT)}:{node.lineno}: {code.value!r}"
    assert calls > 20


def test_every_entry_has_its_docs_text() -> None:
    for code, kind in KINDS.items():
        assert kind.code == code and kind.title.strip() and kind.meaning.strip() and kind.fix.strip(), code
        assert code in kind.example, f"{code}: its example line names another code"


def _all_findings(tmp_path: Path) -> list[Finding]:
    found: list[Finding] = []
    for name, text in (("dirty.toml", DIRTY), ("holes.toml", HOLES)):
        (tmp_path / name).write_text(text, encoding="utf-8")
        found += source_findings(open_source(str(tmp_path / name)))
    for folder in sorted(FIXTURES.iterdir()):
        engine = folder.name.split("-")[0]
        found += source_findings(open_source(f"{engine}:{folder}"))
    for name in ("reference:vllm", "reference:sglang", "bundled:cpu"):
        found += source_findings(open_source(name))
    return found


def test_every_finding_printed_carries_its_code(tmp_path: Path) -> None:
    found = _all_findings(tmp_path)
    assert len(found) > 50
    missing = [str(f) for f in found if not f.code]
    assert not missing, missing[:5]
    for finding in found:
        assert f"{finding.severity} {finding.code}: " in str(finding)
    # the corpus reaches every kind of finding of the table lints
    table = {"T101", "T102", "T103", "T104", "T105", "T106", "T107", "T108", "T201", "T202", "T301", "T401"}
    assert {f.code for f in found} >= table
    assert {f.code for f in found} >= {"E101", "E102", "E201", "E202", "E301", "S101", "S103", "S104", "V101"}


def test_engine_findings_carry_codes() -> None:
    imported = read_engine("vllm", str(FIXTURES / "vllm-new"))
    assert {f.code for f in imported.findings} == {"E101", "E201", "E301", "V104", "N101", "N102"}


def _check(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str]]:
    status = main(["check", *args])
    return status, capsys.readouterr().out.splitlines()


def test_check_select_and_ignore(capsys: pytest.CaptureFixture[str]) -> None:
    vllm = f"vllm:{FIXTURES / 'vllm-new'}"
    status, rack = _check(capsys, vllm, "--select", "N")  # across hosts: what runs in a rack, N101 notes, N102
    assert status == 1 and sorted(CODE.search(line.split(": ", 2)[1]).group(0) for line in rack) == [
        *["N101"] * 4,
        "N102",
    ]
    status, everything = _check(capsys, vllm, "--ignore", "N")
    assert status == 1 and len(everything) == 5
    codes = [CODE.search(line.split(": ", 2)[1]).group(0) for line in everything]
    assert sorted(codes) == ["E101", "E201", "E301", "V104", "V104"]

    status, lines = _check(capsys, vllm, "--ignore", "E101,N")
    assert status == 1 and lines == [line for line in everything if " E101: " not in line]
    status, lines = _check(capsys, vllm, "--ignore", "e,v104,n")  # prefixes, any case
    assert status == 0 and lines == []
    status, lines = _check(capsys, vllm, "--select", "V")
    assert status == 1 and lines == [line for line in everything if " V104: " in line]
    status, lines = _check(capsys, vllm, "--select", "E", "--ignore", "E2,E3")
    assert status == 1 and lines == [line for line in everything if " E101: " in line]


def test_check_refuses_an_unknown_code(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "bundled:cpu", "--ignore", "Q1"]) == 2
    err = capsys.readouterr().err
    assert "--ignore: 'Q1' is no finding code nor a prefix of one" in err and "docs/findings.md" in err


def test_selected_and_parse_codes() -> None:
    a, b = Finding("t", "x", "m", code="T101"), Finding("t", "x", "m", code="E101")
    assert selected([a, b]) == [a, b]
    assert selected([a, b], select=("T",)) == [a]
    assert selected([a, b], ignore=("T1",)) == [b]
    assert parse_codes(" t101 , E ", "--select") == ("T101", "E")
    assert parse_codes(None, "--select") == ()
    with pytest.raises(ArtuneError):
        parse_codes("T9", "--select")


def test_the_review_matches_findings_by_their_fields_not_their_words() -> None:
    """The same finding in another release: the same code, place, world sizes and args, whatever its message
    says and wherever its file and line are; other args or world sizes make another finding."""
    from dataclasses import replace

    from artune.review.build import _key

    found = Finding("t", "9.0", "rows above 8MiB are capped in vLLM 0.33.0", code="E301", world_sizes=(2, 4), args=(8,))
    assert _key(found) == _key(replace(found, message="rows above 8MiB capped (vLLM 0.34.0)", source="x.py:9"))
    assert _key(found) != _key(replace(found, args=(16,)))
    assert _key(found) != _key(replace(found, world_sizes=(2,)))
