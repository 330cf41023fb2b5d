"""Fingerprints of the engines' dispatch functions: which code artune's reading was checked against.

A reader evaluates an engine's own dispatch functions; the engine's own code
(``artune verify-engine``, ``artune.oracles``) confirms, release by release,
that the reading decides as the engine does. A new release or a pull request
may change such a function: the reader still evaluates it, but nothing has
checked that reading. So each function a reader evaluates is fingerprinted,
and a source whose function matches no fingerprint of a verified release gets
a caveat (``CaveatKind.UNFAMILIAR``: ``check`` prints E402, ``explain`` marks
the decisions, ``review`` shows the function's diff).

A fingerprint is a hash of the function's syntax tree without its docstrings
and positions (comments are not in the tree): reformatting, comments and
docstrings keep it; any change of code changes it. The tree is printed in a
normal form (``normal_form``) that Python 3.10-3.13 print alike, so a release
verified on one is verified on all. An engine's C++ (the
TensorRT-LLM header) has no Python tree: its functions are fingerprinted by
their text with comments and whitespace taken out (``fingerprint_text``),
which likewise keeps a reformatting and changes with any token. The verified fingerprints
live in ``verified.json`` beside each engine's reader, as data: per function,
per fingerprint, the releases verified with it. ``artune verify-engine
--record`` (or ``bench/engine_releases.py --record``) adds a release's
fingerprints once every probe agrees; nothing else writes them. Only hashes
are kept: none of an engine's code is in artune.
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where used: this module loads on a bare interpreter (tests/test_fingerprints.py)
    from artune.table.types import Caveat

FILE = "verified.json"
#: how many hex digits of the SHA-256 a fingerprint keeps: collisions among a few hundred functions are moot
DIGITS = 16

Functions = Mapping[str, tuple[str, tuple[str, ...]]]  # function -> fingerprint -> releases verified with it


@dataclass(frozen=True)
class Evaluated:
    """One dispatch function a reader evaluated: its name, fingerprint and place in the source."""

    function: str  # the engine's qualified name: "CustomAllreduce.should_custom_ar"
    fingerprint: str
    where: str  # "FILE:LINE"


#: fields that a Python after 3.10 added to a node of 3.10's grammar (3.12: PEP 695's type parameters; 3.13: their
#: defaults): printed only where they hold something, so that code any supported Python parses prints the same
_ADDED_FIELDS = frozenset({"type_params", "default_value"})
_DOCUMENTED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Module)


def _is_docstring(statement: ast.AST) -> bool:
    return (
        isinstance(statement, ast.Expr)
        and isinstance(statement.value, ast.Constant)
        and isinstance(statement.value.value, str)
    )


def normal_form(node: ast.AST) -> str:
    """The text a fingerprint hashes: the tree as Python 3.10's ``ast.dump(node, annotate_fields=False)`` prints it,
    without docstrings (a body that was only one holds ``Pass()``), on every Python.

    ``ast.dump`` itself differs between interpreters (3.12 adds ``type_params=[]`` to every definition, 3.13 leaves
    out empty fields), so the tree is printed here: a node as ``Name(field, ...)`` in its fields' order, an
    optional field that is ``None`` left out with the fields after it named (as 3.10 prints them), a field that
    a later Python added left out while empty, an f-string's empty pieces (which no Python but some 3.12 releases
    parse) left out, any other value by its ``repr``.
    """
    out: list[str] = []
    _print(node, out)
    return "".join(out)


def _print(value: object, out: list[str]) -> None:
    if isinstance(value, list):
        out.append("[")
        for i, item in enumerate(value):
            out.append(", " if i else "")
            _print(item, out)
        out.append("]")
        return
    if not isinstance(value, ast.AST):
        out.append(repr(value))
        return
    cls = type(value)
    out.append(cls.__name__ + "(")
    named = False  # after an omitted field, 3.10 names the fields that follow
    first = True
    for field in cls._fields:
        try:
            item = getattr(value, field)
        except AttributeError:
            named = True
            continue
        if (item is None and getattr(cls, field, ...) is None) or (field in _ADDED_FIELDS and not item):
            named = True
            continue
        if field == "body" and isinstance(value, _DOCUMENTED) and item and _is_docstring(item[0]):
            item = item[1:] or [ast.Pass()]
        elif field == "values" and isinstance(value, ast.JoinedStr):  # 3.12.0-3.12.x parse an empty piece at the
            item = [v for v in item if not (isinstance(v, ast.Constant) and v.value == "")]  # end of a nested spec
        out.append("" if first else ", ")
        first = False
        if named:
            out.append(field + "=")
        _print(item, out)
    out.append(")")


#: fingerprints of the trees already printed, by identity (a reading prints each function about nine times; the
#: tree is kept with its print so that its id cannot be reused while the entry stands)
_PRINTED: dict[int, tuple[ast.AST, str]] = {}


def fingerprint(node: ast.AST) -> str:
    """The fingerprint of a function (or class, or statement): its tree without docstrings and positions, in a
    normal form that every supported Python prints alike (``normal_form``)."""
    kept = _PRINTED.get(id(node))
    if kept is not None and kept[0] is node:
        return kept[1]
    printed = hashlib.sha256(normal_form(node).encode()).hexdigest()[:DIGITS]
    if len(_PRINTED) >= 4096:
        _PRINTED.clear()
    _PRINTED[id(node)] = (node, printed)
    return printed


_CXX_COMMENT_OR_STRING = re.compile(r'"(?:\\.|[^"\\\n])*"|//[^\n]*|/\*.*?\*/', re.S)
_SPACE_AROUND = re.compile(r"\s*([^\w\s])\s*")


def fingerprint_text(text: str) -> str:
    """The fingerprint of a C++ function's text: comments removed (string literals kept), whitespace removed
    except a single space between two words (``auto x``), so that reformatting keeps it."""
    bare = _CXX_COMMENT_OR_STRING.sub(lambda m: m.group() if m.group().startswith('"') else " ", text)
    normal = _SPACE_AROUND.sub(r"\1", " ".join(bare.split()))
    return hashlib.sha256(normal.encode()).hexdigest()[:DIGITS]


def evaluated_text(function: str, text: str, where: str) -> Evaluated:
    """The record of evaluating the C++ function ``function`` whose source is ``text``, at ``where`` (FILE:LINE)."""
    return Evaluated(function, fingerprint_text(text), where)


def evaluated(function: str, node: ast.AST, source: str, line: int | None = None) -> Evaluated:
    """The record of evaluating ``node`` (named ``function``) from the file labelled ``source``."""
    return Evaluated(function, fingerprint(node), f"{source}:{line if line is not None else node.lineno}")


def _path(engine: str) -> Path:
    return Path(str(resources.files(f"artune.formats.{engine}").joinpath(FILE)))


def load_verified(engine: str) -> dict[str, dict[str, tuple[str, ...]]]:
    """``{function: {fingerprint: releases}}`` of ``engine``'s verified releases (empty when none are kept)."""
    try:
        data = json.loads(_path(engine).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    return {
        function: {print_: tuple(releases) for print_, releases in prints.items()}
        for function, prints in data.get("functions", {}).items()
    }


def unfamiliar(
    engine: str, found: Iterable[Evaluated], verified: Mapping[str, Mapping[str, tuple[str, ...]]] | None = None
) -> list[Caveat]:
    """A caveat for each function of ``found`` whose fingerprint no verified release of ``engine`` has.

    The caveat names the nearest verified release: the one that shares the
    most of ``found``'s fingerprints (ties: the newest).
    A function no verified release has at all (new in this code) is named so.
    ``verified`` replaces the kept data (``load_verified``).
    """
    from artune.table.types import Caveat, CaveatKind

    verified = load_verified(engine) if verified is None else verified
    found = list(found)
    shared: dict[str, int] = {}
    for item in found:
        for release in verified.get(item.function, {}).get(item.fingerprint, ()):
            shared[release] = shared.get(release, 0) + 1
    releases = _releases(verified)
    nearest = max(reversed(releases), key=lambda r: shared.get(r, 0), default="")
    out = []
    for item in found:
        prints = verified.get(item.function)
        if prints is not None and item.fingerprint in prints:
            continue
        if prints is None:
            detail = "is in no release artune was checked against"
        else:
            detail = "differs from every release artune was checked against" + (
                f"; nearest {nearest}" if nearest else ""
            )
        out.append(Caveat(CaveatKind.UNFAMILIAR, item.function, item.where, detail))
    return out


def version_key(release: str) -> tuple[int, ...]:
    """A release's version as numbers, to order releases (``0.10.1.1`` after ``0.10.1``)."""
    return tuple(int(n) for n in re.findall(r"\d+", release))


def _releases(verified: Mapping[str, Mapping[str, tuple[str, ...]]]) -> list[str]:
    """Every release the data names, oldest first (by the numbers in its version)."""
    named = {r for prints in verified.values() for releases in prints.values() for r in releases}
    return sorted(named, key=version_key)


def record(engine: str, release: str, found: Iterable[Evaluated], path: Path | None = None) -> Path:
    """Add ``release``'s fingerprints to ``engine``'s verified data (call only once every probe agreed)."""
    target = path or _path(engine)
    try:
        data = json.loads(target.read_text(encoding="utf-8"))
    except FileNotFoundError:
        data = {}
    functions: dict[str, dict[str, list[str]]] = data.setdefault("functions", {})
    for item in found:
        releases = functions.setdefault(item.function, {}).setdefault(item.fingerprint, [])
        if release not in releases:
            releases.append(release)
    data["about"] = (
        f"Fingerprints of {engine}'s dispatch functions in the releases whose every probe artune's reading "
        "decided as the engine's own code (artune verify-engine --record); hashes only, see "
        "artune.formats.fingerprints."
    )
    target.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return target


__all__ = [
    "Evaluated",
    "evaluated",
    "evaluated_text",
    "fingerprint",
    "fingerprint_text",
    "load_verified",
    "normal_form",
    "record",
    "unfamiliar",
]
