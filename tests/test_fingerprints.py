"""Fingerprints of dispatch functions, and the caveats a reading carries to ``check`` and ``explain``."""

from __future__ import annotations

import ast
import json

from artune.formats.fingerprints import evaluated, fingerprint, load_verified, record, unfamiliar
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
