"""Fingerprints of dispatch functions, and the caveats a reading carries to ``check`` and ``explain``."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from artune.formats import fingerprints
from artune.formats.fingerprints import evaluated, fingerprint, load_verified, record, unfamiliar
from artune.formats.releases import fetch_release
from artune.sources import caveat_findings
from artune.table.types import Band, Caveat, CaveatKind, Plan, Platform, Provenance, Table

BASE = '''
def should_custom_ar(self, inp):
    """Whether to use custom all-reduce."""
    if self.disabled:
        return False
    return inp.numel() * inp.element_size() < self.max_size
'''


def _function(source: str) -> ast.FunctionDef:
    node = ast.parse(source).body[0]
    assert isinstance(node, ast.FunctionDef)
    return node


def test_a_fingerprint_ignores_docstrings_comments_and_layout_and_sees_any_change_of_code() -> None:
    same = BASE.replace('    """Whether to use custom all-reduce."""\n', "    # no docstring now\n").replace(
        "return inp.numel() * inp.element_size() < self.max_size",
        "return (inp.numel() * inp.element_size()\n            < self.max_size)",
    )
    assert fingerprint(_function(same)) == fingerprint(_function(BASE))
    early = BASE.replace("    if self.disabled:", "    if inp.dim() != 2:\n        return False\n    if self.disabled:")
    bound = BASE.replace("< self.max_size", "<= self.max_size")
    prints = {fingerprint(_function(s)) for s in (BASE, early, bound)}
    assert len(prints) == 3


def test_an_unfamiliar_function_names_the_nearest_verified_release(tmp_path) -> None:
    base, changed = _function(BASE), _function(BASE.replace("< self.max_size", "<= self.max_size"))
    other = _function("def should_use_fi_ar(self, inp):\n    return False\n")
    data = tmp_path / "verified.json"
    record("vllm", "0.32.0", [evaluated("A.should_custom_ar", base, "f.py")], data)
    record("vllm", "0.33.0", [evaluated("A.should_custom_ar", base, "f.py"), evaluated("B.fi", other, "g.py")], data)
    verified = {f: {k: tuple(v) for k, v in p.items()} for f, p in json.loads(data.read_text())["functions"].items()}
    assert verified["A.should_custom_ar"] == {fingerprint(base): ("0.32.0", "0.33.0")}

    found = [evaluated("A.should_custom_ar", base, "f.py"), evaluated("B.fi", other, "g.py")]
    assert unfamiliar("vllm", found, verified) == []
    found = [evaluated("A.should_custom_ar", changed, "f.py", 500), evaluated("B.fi", other, "g.py")]
    (caveat,) = unfamiliar("vllm", found, verified)
    assert caveat.kind is CaveatKind.UNFAMILIAR and caveat.where == "f.py:500"
    assert caveat.detail == "differs from every release artune was checked against; nearest 0.33.0"
    new = unfamiliar("vllm", [evaluated("C.new", other, "h.py")], verified)
    assert [c.detail for c in new] == ["is in no release artune was checked against"]


def test_the_kept_data_is_hashes_only() -> None:
    for engine in ("vllm", "sglang", "trtllm"):
        for prints in load_verified(engine).values():
            assert all(len(p) == 16 and int(p, 16) >= 0 for p in prints)


def test_caveats_become_one_finding_each_with_its_code_and_place() -> None:
    caveats = (
        Caveat(CaveatKind.UNEVALUATED, "A.f", "x.py:10", "'g()' not evaluated", "the condition is false", (8,)),
        Caveat(CaveatKind.UNFAMILIAR, "A.h", "x.py:20", "differs from every release"),
    )
    plan = Plan(8, "graph", (Band(None, ("nccl",)),), "nccl")
    tables = [
        Table(Platform("cuda", arch), Provenance("published"), (plan,), origin="vllm:x", caveats=caveats)
        for arch in ("9.0", "10.0")
    ]
    first, second = caveat_findings(tables)
    assert (first.code, first.source, first.arch, first.world_size) == ("E401", "x.py:10", "9.0, 10.0", 8)
    assert "artune assumed the condition is false" in first.message
    assert (second.code, second.world_size) == ("E402", None)
    assert caveats[0].touches(8) and not caveats[0].touches(4) and caveats[1].touches(4)


def test_a_cxx_function_is_fingerprinted_by_its_tokens_not_its_layout() -> None:
    from artune.formats.fingerprints import evaluated_text, fingerprint_text

    base = 'inline int f(int x) // the rule\n{\n    auto s = "a // b";\n    return x + 1; /* one */\n}\n'
    relaid = 'inline int f(int x)\n{\n  auto s = "a // b";  return x+1;\n}'
    assert fingerprint_text(base) == fingerprint_text(relaid)
    assert fingerprint_text(base) != fingerprint_text(base.replace("x + 1", "x + 2"))
    assert fingerprint_text(base) != fingerprint_text(base.replace('"a // b"', '"a b"'))  # a string is code
    assert fingerprint_text("auto x = 1;") != fingerprint_text("autox = 1;")  # words stay apart
    found = evaluated_text("f", base, "h.h:3")
    assert (found.function, found.where, len(found.fingerprint)) == ("f", "h.h:3", 16)


#: run by each other interpreter: loads fingerprints.py by its path (no artune package, no dependency installed
#: there) and prints the fingerprint of every statement of the files under argv[2], by file, line and column
_PRINT_ALL = """
import ast, importlib.util, json, pathlib, sys
spec = importlib.util.spec_from_file_location("fingerprints", sys.argv[1])
module = sys.modules["fingerprints"] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
out = {}
for path in sorted(pathlib.Path(sys.argv[2]).rglob("*.py")):
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.stmt):
            out[f"{path.relative_to(sys.argv[2])}:{node.lineno}:{node.col_offset}"] = module.fingerprint(node)
print(json.dumps(out))
"""


def _other_pythons() -> list[Path]:
    """Python 3.10-3.13 other than this one, as pyenv installs them (``~/.pyenv/versions/3.1X.Y``)."""
    here = f"{sys.version_info.major}.{sys.version_info.minor}."
    found = {}
    for python in sorted(Path.home().glob(".pyenv/versions/3.1[0-3].*/bin/python")):
        minor = python.parent.parent.name.rpartition(".")[0] + "."
        if minor != here and python.is_file():
            found[minor] = python  # the newest patch release of each minor version
    return list(found.values())


@pytest.mark.parametrize(("engine", "version"), [("vllm", "0.27.0"), ("sglang", "0.5.23")])
def test_every_supported_python_prints_a_release_as_its_verified_fingerprints(engine: str, version: str) -> None:
    """Python 3.12 adds ``type_params=[]`` to every definition's tree, 3.13 prints trees otherwise: a fingerprint
    that changed with the interpreter would make a verified release unfamiliar (E402) on some Pythons only."""
    pythons = _other_pythons()
    if not pythons:
        pytest.skip("no other Python 3.10-3.13 under ~/.pyenv/versions: nothing to compare this one's prints with")
    root = fetch_release(engine, version)
    command = [_PRINT_ALL, fingerprints.__file__, str(root)]
    here = json.loads(
        subprocess.run([sys.executable, "-c", *command], capture_output=True, text=True, timeout=300, check=True).stdout
    )
    released = {p for prints in load_verified(engine).values() for p, releases in prints.items() if version in releases}
    assert released and released <= set(here.values())  # every function verified with the release, found in it
    for python in pythons:
        done = subprocess.run([str(python), "-c", *command], capture_output=True, text=True, timeout=300, check=False)
        assert done.returncode == 0, f"{python}: {done.stderr}"
        there = json.loads(done.stdout)
        assert there == here, f"{python} prints {sum(there[k] != v for k, v in here.items())} statements otherwise"


def test_the_normal_form_leaves_out_what_later_pythons_add_and_keeps_what_any_python_parses() -> None:
    node = _function("def f[T](x: T) -> T:\n    return x\n") if sys.version_info >= (3, 12) else None
    if node is not None:  # type parameters are code: they stay
        assert "TypeVar('T'" in fingerprints.normal_form(node)
    plain = _function("def f(x):\n    return f'{x:^{x - 1}}'\n")
    assert "type_params" not in fingerprints.normal_form(plain) and "Constant('')" not in fingerprints.normal_form(
        plain
    )
    if sys.version_info < (3, 12):  # the normal form is 3.10's own dump: fingerprints kept before it stay valid
        assert fingerprints.normal_form(plain) == ast.dump(plain, annotate_fields=False, include_attributes=False)
