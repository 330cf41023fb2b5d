"""Code no release had: vLLM's newest release changed as a pull request could change it, read by artune and run.

Each mutation edits the release's own files in a copy (an early return in a
dispatch predicate, a reordered branch of ``CudaCommunicator.all_reduce``, a
row computed by a helper or changed after its table, a construct the
evaluator does not model). Then vLLM's own code, run by the oracle on the
mutated files, and artune's reading of them decide the same probes: artune's
answers must change exactly as vLLM's do, or artune must name the function
and line it could not follow (an E401 caveat) on the tables it concerns. The
mutations are made on the code's syntax tree, by function name, so they apply
to whatever the release writes there. Every mutated function also differs
from every verified release (E402), nearest the release it came from.

The release is downloaded once and cached (skipped offline without it); each
mutated reading is kept in the test's own folder, not the user's cache.
"""

from __future__ import annotations

import ast
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from artune.errors import ReleaseUnavailable
from artune.formats import read_engine
from artune.formats.releases import fetch_release
from artune.oracles import Probe
from artune.oracles import vllm as oracle
from artune.table.types import CaveatKind

VERSION = "0.34.0"
COMM = "vllm/distributed/device_communicators/"
CUDA, CUSTOM, SYMM, FI = (
    COMM + f for f in ("cuda_communicator.py", "custom_all_reduce.py", "symm_mem.py", "flashinfer_all_reduce.py")
)
UTILS, ALLOCATOR = COMM + "all_reduce_utils.py", COMM + "pynccl_allocator.py"
MiB = 1 << 20


@pytest.fixture(scope="module")
def release() -> Path:
    try:
        fetch_release("flashinfer-python", oracle.FLASHINFER)
        return fetch_release("vllm", VERSION)
    except ReleaseUnavailable as err:
        pytest.skip(f"vllm=={VERSION} is not cached and cannot be downloaded: {err}")


def _function(tree: ast.Module, cls: str | None, name: str) -> ast.FunctionDef:
    body = tree.body
    if cls is not None:
        body = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls).body
    return next(n for n in body if isinstance(n, ast.FunctionDef) and n.name == name)


def _first_statement(node: ast.FunctionDef) -> ast.stmt:
    body = node.body
    docstring = isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
    return body[1] if docstring and len(body) > 1 else body[0]


def early(cls: str | None, name: str, value: str = "False") -> Callable[[str], str]:
    """``return VALUE`` as the first statement of ``cls.name``."""

    def mutate(text: str) -> str:
        first = _first_statement(_function(ast.parse(text), cls, name))
        lines = text.splitlines(keepends=True)
        indent = " " * first.col_offset
        lines.insert(first.lineno - 1, f"{indent}return {value}\n")
        return "".join(lines)

    return mutate


def inserted(cls: str | None, name: str, code: str) -> Callable[[str], str]:
    """``code`` (lines, indented as the function's body) before the first statement of ``cls.name``."""

    def mutate(text: str) -> str:
        first = _first_statement(_function(ast.parse(text), cls, name))
        lines = text.splitlines(keepends=True)
        indent = " " * first.col_offset
        lines[first.lineno - 1 : first.lineno - 1] = [f"{indent}{line}\n" for line in code.splitlines()]
        return "".join(lines)

    return mutate


def symm_before_custom(text: str) -> str:
    """``CudaCommunicator.all_reduce``'s symmetric-memory branch moved before its custom all-reduce branch: the
    branches found by what they call, moved with their lines (and the assignment that precedes each)."""
    func = _function(ast.parse(text), "CudaCommunicator", "all_reduce")

    def branch(call: str) -> tuple[int, int]:
        index = next(
            i
            for i, s in enumerate(func.body)
            if isinstance(s, ast.If) and any(isinstance(n, ast.Attribute) and n.attr == call for n in ast.walk(s.test))
        )
        start = func.body[index - 1] if isinstance(func.body[index - 1], ast.Assign) else func.body[index]
        return start.lineno, func.body[index].end_lineno or 0

    lines = text.splitlines(keepends=True)
    (c0, c1), (s0, s1) = branch("should_custom_ar"), branch("should_use_symm_mem")
    assert c1 < s0
    custom, symm = lines[c0 - 1 : c1], lines[s0 - 1 : s1]
    return "".join(lines[: c0 - 1] + symm + lines[c1 : s0 - 1] + custom + lines[s1:])


def appended(code: str) -> Callable[[str], str]:
    return lambda text: text + "\n" + code + "\n"


Edit = tuple[str, Callable[[str], str]]  # (file, what it becomes)
#: name -> (the edits, the function an E401 caveat must name where artune cannot follow the code; None: it can)
MUTATIONS: dict[str, tuple[list[Edit], str | None]] = {
    "custom all-reduce declines every size": ([(CUSTOM, early("CustomAllreduce", "should_custom_ar"))], None),
    "FlashInfer declines every size": ([(FI, early("FlashInferAllReduce", "should_use_fi_ar"))], None),
    "symmetric memory declines every size": ([(SYMM, early("SymmMemCommunicator", "should_use_symm_mem"))], None),
    "FlashInfer finds no backend": ([(FI, early(None, "_resolve_fi_ar_backend", "None, False"))], None),
    "NCCL symmetric memory is on": ([(ALLOCATOR, early(None, "is_symmetric_memory_enabled", "True"))], None),
    "NCCL symmetric memory is on and declines every size": (
        [
            (ALLOCATOR, early(None, "is_symmetric_memory_enabled", "True")),
            (UTILS, early(None, "should_nccl_symm_mem_allreduce")),
        ],
        None,
    ),
    "symmetric memory asked before custom all-reduce": ([(CUDA, symm_before_custom)], None),
    "a row computed by a helper after the table": (
        [
            (
                UTILS,
                appended(
                    "def _doubled(arch):\n"
                    "    return {ws: 2 * size for ws, size in SYMM_MEM_ALL_REDUCE_MAX_SIZES[arch].items()}\n\n"
                    'SYMM_MEM_ALL_REDUCE_MAX_SIZES["9.0"] = _doubled("9.0")'
                ),
            )
        ],
        None,
    ),
    "a row changed by a statement after the table": (
        [(UTILS, appended('SYMM_MEM_ALL_REDUCE_MAX_SIZES["9.0"][8] = 8 * 1024 * 1024'))],
        None,
    ),
    "a loop artune does not model": (
        [
            (
                SYMM,
                inserted(
                    "SymmMemCommunicator",
                    "should_use_symm_mem",
                    "spins = 0\nwhile spins < 3:\n    spins += 1\nif spins == 3:\n    return False",
                ),
            )
        ],
        "SymmMemCommunicator.should_use_symm_mem",
    ),
    "a call nothing stands in for": (
        [
            (
                CUSTOM,
                inserted(
                    "CustomAllreduce",
                    "should_custom_ar",
                    "import ctypes\nif ctypes.sizeof(ctypes.c_int) == 4:\n    return False",
                ),
            )
        ],
        "CustomAllreduce.should_custom_ar",
    ),
}


def _probes(root: Path) -> list[Probe]:
    """A slice of the release's probes: two archs, world sizes 2, 4, 6, 8 on one host, 8 over two hosts of one
    NVLink domain and 2 over a network."""
    keep = {(ws, 1, "host") for ws in (2, 4, 6, 8)} | {(8, 2, "rack"), (2, 2, "host")}
    return [p for p in oracle.probes(root) if p.arch in ("9.0", "10.3") and (p.world_size, p.hosts, p.nvlink) in keep]


def _mutated(release: Path, tmp_path: Path, edits: list[Edit]) -> Path:
    root = tmp_path / "vllm"
    shutil.copytree(release / "vllm", root / "vllm")
    for rel, mutate in edits:
        before = (root / rel).read_text()
        after = mutate(before)
        assert after != before
        (root / rel).write_text(after)
    return root


@pytest.mark.parametrize("name", list(MUTATIONS))
def test_a_mutation_changes_artunes_decisions_as_it_changes_vllms(
    name: str, release: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ARTUNE_READINGS_DIR", str(tmp_path / "readings"))
    edits, unfollowed = MUTATIONS[name]
    root = _mutated(release, tmp_path, edits)
    probes = _probes(root)  # the mutated code's bounds: new rows give new sizes to ask at
    engine = oracle.engine_decisions(root, probes)
    mine = oracle.artune_decisions(root, probes)
    differ = [(p, e, m) for p, e, m in zip(probes, engine, mine, strict=True) if e != m]
    tables = read_engine("vllm", str(root)).tables
    caveats = {c for arch in ("9.0", "10.3") for c in tables.resolve(arch).caveats}
    if unfollowed is None:
        assert differ == [], differ[:5]
        assert not [c for c in caveats if c.kind is CaveatKind.UNEVALUATED]
    else:
        named = [c for c in caveats if c.kind is CaveatKind.UNEVALUATED and c.function == unfollowed]
        assert named and all(c.where.startswith(f"{root}/{edits[0][0]}:") for c in named), caveats
        assert all(c.assumed for c in named)
    if "declines every size" not in name or "NCCL" not in name:  # declining what is off changes nothing
        before = oracle.engine_decisions(release, probes)
        assert engine != before, "the mutation must change what vLLM runs on some probe"


def test_a_table_changed_after_its_literal_is_no_longer_a_copy(release: Path, tmp_path: Path, monkeypatch) -> None:
    """The issue's case: a row a statement after the literal computes is what vLLM has, so check reads it, and
    names that statement's line."""
    from artune.formats.files import read_source
    from artune.formats.vllm.code import FILES, ReleaseCode
    from artune.formats.vllm.figures import read_figures

    monkeypatch.setenv("ARTUNE_READINGS_DIR", str(tmp_path / "readings"))
    root = _mutated(release, tmp_path, [(UTILS, appended('CUSTOM_ALL_REDUCE_MAX_SIZES["10.7"] = {2: 1 << 20}'))])
    imported = read_engine("vllm", str(root))
    assert not any(f.code == "E101" and f.arch == "10.7" for f in imported.findings)
    assert any(f.code == "E101" and f.arch == "10.7" for f in read_engine("vllm", str(release)).findings)
    rubin, blackwell = imported.tables.tables["10.7"], imported.tables.tables["10.3"]
    assert rubin.plan(2, "eager").bands != blackwell.plan(2, "eager").bands
    files = [read_source(root / rel) for rel in FILES if (root / rel).is_file()]
    figures = read_figures(ReleaseCode(files, keep=False))
    line = len((root / UTILS).read_text().splitlines())
    assert figures.custom_ar["10.7"] == {2: 1 << 20}
    assert figures.line("CUSTOM_ALL_REDUCE_MAX_SIZES", "10.7").endswith(f"{UTILS}:{line}")
