"""TensorRT-LLM's header, compiled with g++, decides; artune's reading of the same header must agree on every probe.

The revisions are fixtures kept with their commits named
(``tests/fixtures/trtllm-005b299``: out of range is NCCL_SYMMETRIC, the
workspace 16/8 MB; ``tests/fixtures/trtllm-3d56e29``: out of range is NCCL,
the workspace 64 MiB, other cells; ``10a9412`` in
``tests/fixtures/trtllm-revisions``: the guard that sends a fused op the map
lacks to NCCL). The oracle (``src/artune/oracles/trtllm.py``) compiles each
header unchanged against stand-ins for ``getSMVersion`` and the environment
switches. ``bench/trtllm_revisions.py`` runs every revision the fixtures
keep.

The mutation tests change ``selectStrategyLookUpTable`` the way a pull
request could (an early return, another SM mapping, a reordered bounds test,
a statement artune does not model) and compile the changed header: artune's
decision must change as the compiled function's does, or artune must name
the function (a caveat that touches the call). Without g++ these tests skip.
"""

from __future__ import annotations

import functools
import shutil
import tarfile
from pathlib import Path

import pytest

from artune.errors import OracleUnavailable
from artune.formats.trtllm.read import HEADER, arch_of, read_trtllm
from artune.oracles import RAISES
from artune.oracles import trtllm as oracle
from artune.table.types import Caveat

FIXTURES = Path(__file__).parent / "fixtures"
REVISIONS = FIXTURES / "trtllm-revisions" / "revisions.tar.xz"


def checkout(tmp_path: Path, name: str) -> Path:
    """A fixture revision as a folder laid out like a checkout (copied, so that a test may change it)."""
    target = tmp_path / name
    if (FIXTURES / f"trtllm-{name}").is_dir():
        shutil.copytree(FIXTURES / f"trtllm-{name}", target)
        return target
    with tarfile.open(REVISIONS) as archive:
        archive.extractall(tmp_path, members=[m for m in archive.getmembers() if m.name.startswith(f"{name}/")])
    return target


def answers(root: Path, probes: list[oracle.ShapeProbe]) -> tuple[list[str], list[str]]:
    try:
        engine = oracle.engine_decisions(root, probes)
    except OracleUnavailable as err:
        pytest.skip(str(err))
    return engine, oracle.artune_decisions(root, probes)


@pytest.mark.parametrize("revision", ["005b299", "3d56e29", "10a9412"])
def test_artune_decides_as_the_compiled_header_on_every_probe(tmp_path: Path, revision: str) -> None:
    root = checkout(tmp_path, revision)
    probes = oracle.probes(root)
    engine, mine = answers(root, probes)
    assert len(probes) > 400_000
    differ = [(str(p), e, m) for p, e, m in zip(probes, engine, mine, strict=True) if e != m]
    assert differ == [], differ[:5]
    # the probes reach every answer the header gives: both kernels, NCCL, and the out-of-range strategy
    assert {"trtllm_oneshot", "trtllm_twoshot", "nccl"} <= set(engine)
    within = oracle.within_workspace(root, probes)
    assert 0 < sum(within) < len(probes)  # the workspace cap decides some probes, the table the rest


SMALL = {
    "sm": (90, 100, 103, 120),
    "tp": (1, 2, 3, 4, 6, 8, 16),
    "hidden": (64, 100, 128, 1000, 4096, 7168, 8192, 16384),
    "tokens": (1, 2, 3, 16, 31, 32, 33, 100, 1024, 16384, 32768, 40000),
}


def small_probes(root: Path) -> list[oracle.ShapeProbe]:
    """Fewer probes than ``oracle.probes``: every row and its neighbours, for the mutated headers."""
    fusions = {p.fusion: p.fusion_value for p in oracle.probes(root)[:1000]}
    return [
        oracle.ShapeProbe(sm, t, hidden, fusion, value, tp, t * hidden * oracle.BF16)
        for sm in SMALL["sm"]
        for tp in SMALL["tp"]
        for fusion, value in fusions.items()
        for hidden in SMALL["hidden"]
        for t in SMALL["tokens"]
    ]


def mutate(tmp_path: Path, old: str, new: str) -> Path:
    root = checkout(tmp_path, "3d56e29")
    path = root / HEADER
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))
    return root


SM_LINE = "    auto sm_version = tensorrt_llm::common::getSMVersion();"
ROW = "AllReduceBestStrategyTable.at(sm_version).at(tp_index).at(fusion_op_index)"
HIDDEN_TEST = f"        || hidden_size_index >= {ROW}.size()"
TOKENS_TEST = f"        || num_token_index\n            >= {ROW}.at(hidden_size_index).size()"
BOUNDS = f"{HIDDEN_TEST}\n{TOKENS_TEST})"
REORDERED = f"{TOKENS_TEST}\n{HIDDEN_TEST})"


@functools.lru_cache(maxsize=16)
def caveats(root: Path, sm: int) -> tuple[Caveat, ...]:
    """artune's caveats on its table for ``sm`` read from ``root`` (read once: thousands of probes ask)."""
    return tuple(read_trtllm(str(root)).tables.resolve(arch_of(sm), quiet=True).caveats)


def named(root: Path, probe: oracle.ShapeProbe, line: int | None = None) -> bool:
    """Whether artune's table for the probe's SM has a caveat naming selectStrategyLookUpTable (at ``line``)
    that touches the probe's world size."""
    return any(
        c.function.startswith("selectStrategyLookUpTable")
        and c.touches(probe.tp)
        and (line is None or c.where.endswith(f":{line}"))
        for c in caveats(root, probe.sm)
    )


@pytest.mark.parametrize(
    ("old", "new", "changes"),
    [
        # an early return: artune runs it
        (
            SM_LINE,
            "    if (num_tokens < 32 && tp_size == 8)\n    {\n        return AllReduceStrategyType::TWOSHOT;\n    }\n"
            + SM_LINE,
            True,
        ),
        # another SM mapping: SM 100..119 keep their version (no table: out of range), SM 120 reads SM90's table
        (
            "    if (sm_version >= 100)\n    {\n        sm_version = 100;\n    }",
            "    if (sm_version >= 120)\n    {\n        sm_version = 90;\n    }",
            True,
        ),
        # a statement of a function artune does not model, which has no effect (the stand-in returns 0)
        (
            SM_LINE,
            "    if (tensorrt_llm::common::getEnvAllReduceWorkspaceSize() > 0)\n    {\n"
            "        return AllReduceStrategyType::ONESHOT;\n    }\n" + SM_LINE,
            False,
        ),
    ],
)
def test_a_changed_function_decides_as_its_compiled_self(tmp_path: Path, old: str, new: str, changes: bool) -> None:
    root = mutate(tmp_path, old, new)
    probes = small_probes(root)
    engine, mine = answers(root, probes)
    differ = [(str(p), e, m) for p, e, m in zip(probes, engine, mine, strict=True) if e != m]
    assert differ == [], differ[:5]
    original, _ = answers(checkout(tmp_path / "original", "3d56e29"), probes)
    assert (engine != original) is changes  # the mutation moves decisions, or (unmodelled, no effect) none


def test_a_statement_artune_cannot_run_is_named_where_it_matters(tmp_path: Path) -> None:
    # the unmodelled call decides here (the stand-in returns 0): the compiled function sends every call to
    # ONESHOT, artune assumes the test false; every call it decides is marked as touched by the caveat
    root = mutate(
        tmp_path,
        SM_LINE,
        "    if (tensorrt_llm::common::getEnvAllReduceWorkspaceSize() == 0)\n    {\n"
        "        return AllReduceStrategyType::ONESHOT;\n    }\n" + SM_LINE,
    )
    probes = small_probes(root)
    engine, mine = answers(root, probes)
    differ = [p for p, e, m in zip(probes, engine, mine, strict=True) if e != m]
    assert differ and all(named(root, p, line=98) for p in differ)


def test_a_reordered_bounds_test_that_throws_is_named(tmp_path: Path) -> None:
    # checking the token index first reads .at(hidden_size_index) out of range for hidden sizes past the table:
    # std::out_of_range, which the compiled function throws; artune has no plan there and names the function
    root = mutate(tmp_path, BOUNDS, REORDERED)
    probes = small_probes(root)
    engine, mine = answers(root, probes)
    assert RAISES in engine
    differ = [p for p, e, m in zip(probes, engine, mine, strict=True) if e != m]
    assert differ and all(e == RAISES for p, e, m in zip(probes, engine, mine, strict=True) if e != m)
    assert all(named(root, p) for p in differ)
    agree = sum(e == m for e, m in zip(engine, mine, strict=True))
    assert agree > len(probes) // 2


def test_every_revision_in_the_fixtures_is_a_revision_artune_verified() -> None:
    # verified.json is generated by bench/trtllm_revisions.py --record: each fixture's functions are in it
    from artune.formats.files import SourceFile
    from artune.formats.fingerprints import load_verified
    from artune.formats.trtllm.read import read_files

    verified = load_verified("trtllm")
    with tarfile.open(REVISIONS) as archive:
        names = sorted({m.name.split("/")[0] for m in archive.getmembers()})
        for name in names:
            texts: dict[str, str] = {}
            for kind, rel in (("header", HEADER), ("enums", "cpp/tensorrt_llm/kernels/customAllReduceKernels.h")):
                member = archive.extractfile(f"{name}/{rel}")
                assert member is not None
                texts[kind] = member.read().decode()
            reading = read_files(SourceFile(f"{name}/{HEADER}", texts["header"]), SourceFile("e", texts["enums"]))
            for item in reading.evaluated:
                assert item.fingerprint in verified.get(item.function, {}), (name, item.function)
