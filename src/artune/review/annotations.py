"""Findings where the diff is: GitHub workflow annotations and SARIF 2.1.0, for ``check`` and ``review``.

Both print ``Question``s (a check finding is one: ``question_of``) at their
file and line relative to the checkout the command ran in (``checkout_path``:
a release's ``vllm==0.27.0/vllm/...`` is ``vllm/...``, the path inside the
package; an absolute path under the working directory is made relative).

- ``github``: one workflow command a question, ``::warning file=F,line=L,
  title=E101::MESSAGE``, level by severity (error, warning; a note is a
  notice), data and properties escaped as the Actions toolkit escapes them.
  GitHub shows 10 annotations of each level per step: errors come first,
  then warnings, then notices (each in the order given), at most ``LIMIT`` of
  each level, and a last line says how many were printed of how many;
- ``sarif``: a SARIF 2.1.0 log, one rule per code of the findings registry
  (``artune.findings``: its title, meaning, fix and docs page) and one
  result per question, with its location. GitHub code scanning refuses a
  result without one: a question with no file of its own (a moved range,
  X111; a modelled loss, X113) is placed at the file it is about, the
  engine's table file (``table_file``), without a line.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from artune.errors import ArtuneError
from artune.findings import KINDS, PREFIXES
from artune.review.types import Question
from artune.table.check import Finding

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_RELEASE = re.compile(r"^[A-Za-z0-9_.-]+==[^/\s]+/")  # "vllm==0.27.0/": a release's files, as artune labels them
_FILE = re.compile(r"\.(py|h|hpp|cuh|cu|cpp|cc|toml|json|jsonl|txt|csv|md)$")
_GITHUB_LEVEL = {"error": "error", "warning": "warning", "note": "notice"}
#: the annotations of one level that GitHub shows per step (docs.github.com: workflow commands, annotations)
LIMIT = 10
_SARIF_LEVEL = {"error": "error", "warning": "warning", "note": "note"}


def question_of(finding: Finding) -> Question:
    """A finding of ``artune check`` as the question it asks, at its file and line (or its table)."""
    scope = f"ws {finding.world_size}" if finding.world_size is not None else ""
    scope += f" across {finding.hosts} hosts" if finding.hosts > 1 else ""
    scope += f" ({finding.mode})" if finding.mode else ""
    sizes = (finding.world_size,) if finding.world_size is not None else ()
    modes = (finding.mode,) if finding.mode else ()
    where = finding.source or finding.table
    return Question(
        finding.severity,
        where,
        finding.arch,
        scope.strip(),
        finding.message,
        finding.code,
        sizes,
        modes,
        named=finding.world_sizes,
    )


def checkout_path(where: str, cwd: Path | None = None) -> tuple[str, int | None]:
    """``(path, line)`` of a question's place relative to the checkout: ``("", None)`` where it is no file
    (``reference:vllm``), ``line`` None where it names none."""
    path, colon, line = where.rpartition(":")
    if not (colon and line.isdigit()):
        path, line = where, ""
    path = _RELEASE.sub("", path)
    if not path or not (_FILE.search(path) or "/" in path) or ":" in path:
        return "", None
    if os.path.isabs(path):
        base = (cwd or Path.cwd()).resolve()
        with contextlib.suppress(ValueError):  # outside the checkout: the absolute path is the best there is
            path = Path(path).resolve().relative_to(base).as_posix()
    return path, int(line) if line else None


def _text(q: Question) -> str:
    scope = ("every arch" if q.arch == "*" else f"arch {q.arch}") + (f" {q.scope}" if q.scope else "")
    return f"{scope}: {q.message}" + (f"\nAnswer: {q.answer}" if q.answer else "")


def _data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def github(questions: Sequence[Question], cwd: Path | None = None) -> str:
    """One GitHub Actions workflow command a question (``::warning file=...,line=...,title=E101::...``): errors
    first, then warnings, then notices, at most ``LIMIT`` of each (what GitHub shows), and a last line, no
    annotation, that says how many were printed of how many."""
    levels = list(_GITHUB_LEVEL.values())
    ordered = sorted(questions, key=lambda q: levels.index(_GITHUB_LEVEL.get(q.severity, "warning")))
    lines = []
    shown = dict.fromkeys(levels, 0)
    for q in ordered:
        level = _GITHUB_LEVEL.get(q.severity, "warning")
        if shown[level] == LIMIT:
            continue
        shown[level] += 1
        path, line = checkout_path(q.where, cwd)
        props = [f"file={_property(path)}"] if path else []
        props += [f"line={line}"] if path and line else []
        props += [f"title={_property(q.code or 'artune')}"]
        lines.append(f"::{level} {','.join(props)}::{_data(_text(q))}")
    printed = f"artune: printed {len(lines)} of {len(questions)} annotations"
    if len(lines) < len(questions):
        printed += (
            f" (GitHub shows {LIMIT} of each level per step: the errors first, then the warnings, then the notices;"
            " every one is in the text or SARIF output)"
        )
    return "".join(f"{line}\n" for line in [*lines, printed])


def docs_url() -> str | None:
    """Where ``docs/findings.md`` is published: the package's ``Documentation`` project URL (its
    ``/findings/`` page), or None where the package names none."""
    from importlib import metadata

    try:
        urls = metadata.metadata("artune").get_all("Project-URL") or []
    except metadata.PackageNotFoundError:
        return None
    for entry in urls:
        label, _, url = entry.partition(",")
        if label.strip().lower() == "documentation" and url.strip():
            return url.strip().rstrip("/") + "/findings/"
    return None


def _rule(code: str, docs: str | None) -> dict[str, Any]:
    kind = KINDS[code]
    rule: dict[str, Any] = {
        "id": code,
        "name": re.sub(r"[^A-Za-z0-9]+", " ", kind.title).title().replace(" ", ""),
        "shortDescription": {"text": kind.title},
        "fullDescription": {"text": kind.meaning},
        "help": {"text": kind.fix, "markdown": f"**Fix.** {kind.fix}\n\nSee `docs/findings.md#{code.lower()}`."},
        "properties": {"tags": [PREFIXES[code[0]]]},
    }
    if docs is not None:
        rule["helpUri"] = f"{docs}#{code.lower()}"
    return rule


def table_file(spec: str) -> str:
    """The engine's table file in the table source ``spec`` (``vllm==0.27.0``, ``vllm:PATH``, ``sglang:PATH``,
    ``trtllm:PATH``), as artune labels a file: where a question with no place of its own is placed. "" where
    ``spec`` is no engine's source."""
    from artune.formats.registry import READABLE, engine
    from artune.formats.releases import release_spec

    head = spec.rpartition("@")[0] if "@" in spec else spec
    try:
        release = release_spec(head)
    except ArtuneError:
        release = None
    if release is not None:
        return f"{head}/{engine(release[0]).table_file}"
    name, sep, root = head.partition(":")
    if not (sep and name in READABLE and root and engine(name).table_file):
        return ""
    if Path(root).is_file():
        return root
    plugin = engine(name)
    # a wheel's layout, a checkout's (SGLang's package under python/)
    layouts = [plugin.table_file, *([plugin.checkout_prefix + plugin.table_file] if plugin.checkout_prefix else [])]
    found = next((rel for rel in layouts if (Path(root) / rel).is_file()), layouts[0])
    return os.path.normpath(os.path.join(root, found))


def sarif(questions: Sequence[Question], cwd: Path | None = None, about: str = "") -> dict[str, Any]:
    """A SARIF 2.1.0 log: artune as the tool, a rule per finding code, a result per question.

    ``about`` (a file as artune labels it: ``table_file``) is the location of a question with no file of its own;
    code scanning refuses a result without one."""
    from artune._version import __version__

    docs = docs_url()
    codes = list(KINDS)
    results = []
    for q in questions:
        result: dict[str, Any] = {
            "ruleId": q.code or "artune",
            "level": _SARIF_LEVEL.get(q.severity, "warning"),
            "message": {"text": _text(q)},
            "properties": {"arch": q.arch, **({"scope": q.scope} if q.scope else {})},
        }
        if q.code in KINDS:
            result["ruleIndex"] = codes.index(q.code)
        path, line = checkout_path(q.where, cwd)
        if not path:
            path, line = checkout_path(about, cwd)[0], None
        if path:
            location: dict[str, Any] = {"artifactLocation": {"uri": path}}
            if line:
                location["region"] = {"startLine": line}
            result["locations"] = [{"physicalLocation": location}]
        results.append(result)
    driver: dict[str, Any] = {
        "name": "artune",
        "version": __version__,
        "rules": [_rule(code, docs) for code in codes],
    }
    if docs is not None:
        driver["informationUri"] = docs.removesuffix("findings/")
    return {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [{"tool": {"driver": driver}, "results": results}]}
