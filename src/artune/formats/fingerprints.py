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
docstrings keep it; any change of code changes it. An engine's C++ (the
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
import copy
import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from artune.table.types import Caveat, CaveatKind

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


def _without_docstrings(node: ast.AST) -> ast.AST:
    node = copy.deepcopy(node)
    for inner in ast.walk(node):
        body = getattr(inner, "body", None)
        if (
            isinstance(inner, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Module)
            and isinstance(body, list)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            inner.body = body[1:] or [ast.Pass()]
    return node


#: fingerprints of the trees already printed, by identity (a reading prints each function about nine times; the
#: tree is kept with its print so that its id cannot be reused while the entry stands)
_PRINTED: dict[int, tuple[ast.AST, str]] = {}


def fingerprint(node: ast.AST) -> str:
    """The fingerprint of a function (or class, or statement): its tree without docstrings and positions."""
    kept = _PRINTED.get(id(node))
    if kept is not None and kept[0] is node:
        return kept[1]
    dumped = ast.dump(_without_docstrings(node), annotate_fields=False, include_attributes=False)
    printed = hashlib.sha256(dumped.encode()).hexdigest()[:DIGITS]
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
    "record",
    "unfamiliar",
]
