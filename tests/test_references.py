"""The bundled vLLM and SGLang reference tables decide exactly as the engines do.

The expected decisions are re-implemented here straight from the published
figures (``shared/reference/published-tables.md``), independently of
``artune.formats.references``: the thresholds are re-typed as the engines write
them and each engine's first-match rule is coded again.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import replace
from typing import NamedTuple

import pytest

from artune.catalog import SPECS
from artune.errors import ArtuneError
from artune.formats.references import REFERENCES, reference_set
from artune.table.decide import decide
from artune.table.io import digest, dumps_table, loads_table
from artune.table.types import Band

KiB = KB = 1024
MiB = MB = 1024 * 1024
GiB = 1024 * MiB
MODES = ("graph", "eager")

# ---------------------------------------------------------------- vLLM, as the engine writes it

VLLM_CUSTOM_AR = {  # nbytes < min(row, 8 MiB), where symmetric memory starts
    "9.0": {2: 64 * MiB, 4: 32 * MiB, 6: MiB // 2, 8: MiB // 4},
    "10.0": {2: 2 * MiB, 4: 2 * MiB, 6: 1 * MiB, 8: 1 * MiB},
    "10.3": {2: 4 * MiB, 4: 4 * MiB, 6: 8 * MiB, 8: 4 * MiB},
    "10.7": {2: 4 * MiB, 4: 4 * MiB, 6: 8 * MiB, 8: 4 * MiB},
}
VLLM_SYMM_MEM = {  # nbytes <= row (vLLM 0.22 on)
    "9.0": {2: 64 * MiB, 4: 32 * MiB, 6: 64 * MiB, 8: 64 * MiB},
    "10.0": {2: 8 * MiB, 4: 32 * MiB, 6: 128 * MiB, 8: 128 * MiB},
    "10.3": {2: 4 * MiB, 4: 32 * MiB, 6: 32 * MiB, 8: 64 * MiB},
    "10.7": {2: 4 * MiB, 4: 32 * MiB, 6: 32 * MiB, 8: 64 * MiB},
}
VLLM_MULTIMEM = {"9.0": [4, 6, 8], "10.0": [6, 8], "10.3": [6, 8], "10.7": [6, 8]}
VLLM_FLASHINFER_MB = {  # FlashInfer's all-reduce, first, nbytes <= MB (vLLM 0.29 on)
    "9.0": {2: 64, 4: 2, 8: 0.5},
    "10.0": {2: 64, 4: 32, 8: 1, 16: 64},
    "10.3": {2: 64, 4: 64, 8: 4, 16: 64},
    "10.7": {2: 64, 4: 64, 8: 2},
}
VLLM_MNNVL_MB = {("10.0", 8): 128, ("10.3", 4): 80, ("10.3", 8): 128}  # one host: replaces the row above
VLLM_NAMES = ("flashinfer_ar", "custom_ar", "symm_mem_multimem", "symm_mem_two_shot", "nccl")
VLLM_DTYPES = ("bfloat16", "float16", "float32")


def vllm_rule(arch: str | None, ws: int, dtype: str, nbytes: int, multicast: bool = True) -> str:
    """vLLM 0.33.0's choice with default settings; ``arch=None`` is an arch missing from its tables.

    CudaCommunicator.all_reduce asks FlashInfer, then custom all-reduce, then
    torch symmetric memory; pynccl takes the rest. Without multicast vLLM
    builds no symmetric-memory communicator at all, and then custom
    all-reduce keeps its 8 MiB default instead of its row.
    """
    fp = dtype in ("float32", "float16", "bfloat16")
    fi_mb = VLLM_MNNVL_MB.get((arch, ws)) or VLLM_FLASHINFER_MB.get(arch or "", {}).get(ws)
    if fp and fi_mb and nbytes <= int(fi_mb * MiB):
        return "flashinfer_ar"
    symm_up = multicast and arch is not None and ws in VLLM_SYMM_MEM[arch]
    ca_max = min(VLLM_CUSTOM_AR[arch][ws], 8 * MiB) if symm_up and ws in VLLM_CUSTOM_AR[arch] else 8 * MiB
    if ws in (2, 4, 6, 8) and fp and nbytes % 16 == 0 and nbytes < ca_max:
        return "custom_ar"
    if symm_up and dtype == "bfloat16" and nbytes % 4 == 0 and nbytes <= VLLM_SYMM_MEM[arch][ws]:
        return "symm_mem_multimem" if ws in VLLM_MULTIMEM[arch] else "symm_mem_two_shot"
    return "nccl"


def catalog_available(ws: int, dtype: str, nbytes: int, multicast: bool = True) -> frozenset[str]:
    """The run-time availability model: the catalog's static conditions."""
    return frozenset(name for name in VLLM_NAMES if SPECS[name].conditions.unmet(ws, dtype, nbytes, multicast) is None)


# ---------------------------------------------------------------- SGLang 0.5.23, as the engine writes it


class Range(NamedTuple):
    min_bytes: float
    max_bytes: float

    def contains(self, n: int) -> bool:
        return self.min_bytes <= n <= self.max_bytes

    def clip(self, cap: int) -> Range:
        return Range(min(self.min_bytes, cap), min(self.max_bytes, cap))


class Heur(NamedTuple):
    push: int
    pull: int
    two_shot: int
    mc: Range = Range(0, 0)
    two_shot_push: int = 0


def pack(*args: object, two_shot_push: float = 0) -> Heur:
    # floats at the top level are int()-ed; Range bounds stay as written
    return Heur(*[int(a) if isinstance(a, float) else a for a in args])._replace(two_shot_push=int(two_shot_push))


SGL_SM90_GRAPH = {
    2: (16.00 * MB, 128.0 * MB, 128.0 * MB),
    3: (1.250 * MB, 1.250 * MB, 128.0 * MB),
    4: (384.0 * KB, 384.0 * KB, 128.0 * MB),
    5: (192.0 * KB, 192.0 * KB, 32.00 * MB),
    6: (128.0 * KB, 128.0 * KB, 32.00 * MB, Range(8 * MB, 32 * MB)),
    7: (128.0 * KB, 128.0 * KB, 32.00 * MB, Range(1 * MB, 32 * MB)),
    8: (128.0 * KB, 128.0 * KB, 32.00 * MB, Range(512 * KB, 128 * MB)),
}
SGL_SM90_EAGER = {
    2: (32.00 * MB, 128.0 * MB, 128.0 * MB),
    3: (3.000 * MB, 3.000 * MB, 16.00 * MB),
    4: (896.0 * KB, 896.0 * KB, 32.00 * MB, Range(0, 32 * MB)),
    5: (384.0 * KB, 384.0 * KB, 32.00 * MB, Range(0, 32 * MB)),
    6: (192.0 * KB, 192.0 * KB, 32.00 * MB, Range(0, 32 * MB)),
    7: (128.0 * KB, 128.0 * KB, 32.00 * MB, Range(0, 32 * MB)),
    8: (128.0 * KB, 128.0 * KB, 128.0 * MB, Range(0, 128 * MB)),
}
SGL_SM100_GRAPH = {
    2: (8.000 * MB, 32.00 * MB, 128.0 * MB),
    3: (4.000 * MB, 4.000 * MB, 128.0 * MB),
    4: (0.625 * MB, 0.625 * MB, 128.0 * MB),
    5: (1.500 * MB, 1.500 * MB, 128.0 * MB),
    6: (1.000 * MB, 1.000 * MB, 128.0 * MB),
    7: (0.625 * MB, 0.625 * MB, 128.0 * MB),
    8: (256 * KB, 256 * KB, 128.0 * MB, Range(8 * MB, 128 * MB)),
    16: (0.250 * MB, 0.250 * MB, 128.0 * MB, Range(256 * KB, 128 * MB)),
}
SGL_SM100_EAGER = {
    2: (16.00 * MB, 128.0 * MB, 128.0 * MB),
    3: (8.000 * MB, 8.000 * MB, 32.00 * MB),
    4: (0.625 * MB, 0.625 * MB, 32.00 * MB),
    5: (2.000 * MB, 2.000 * MB, 32.00 * MB, Range(0, 32 * MB)),
    6: (1.250 * MB, 1.250 * MB, 64.00 * MB, Range(0, 64 * MB)),
    7: (1.000 * MB, 1.000 * MB, 64.00 * MB, Range(0, 64 * MB)),
    8: (256 * KB, 256 * KB, 128.0 * MB, Range(0, 128 * MB)),
    16: (0.250 * MB, 0.250 * MB, 128.0 * MB, Range(256 * KB, 128 * MB)),
}
SGL_SM100_TWO_SHOT_PUSH = {4: 8 * MB, 8: 8 * MB}  # set by keyword on both modes
SGL_SM107_GRAPH = {
    2: (128.0 * MB, 128.0 * MB, 128.0 * MB),
    3: (19.625 * MB, 19.625 * MB, 128.0 * MB),
    4: (6.938 * MB, 6.938 * MB, 128.0 * MB),
    5: (6.938 * MB, 6.938 * MB, 128.0 * MB, Range(6.938 * MB, 128 * MB)),
    6: (4.875 * MB, 4.875 * MB, 128.0 * MB, Range(4.875 * MB, 128 * MB)),
    7: (3.438 * MB, 3.438 * MB, 128.0 * MB, Range(3.438 * MB, 128 * MB)),
    8: (2.438 * MB, 2.438 * MB, 128.0 * MB, Range(2.438 * MB, 128 * MB)),
    16: (832.0 * KB, 832.0 * KB, 128.0 * MB, Range(832 * KB, 128 * MB)),
}
SGL_SM107_EAGER = {
    **SGL_SM107_GRAPH,
    3: (39.188 * MB, 39.188 * MB, 128.0 * MB),
    4: (9.812 * MB, 9.812 * MB, 128.0 * MB, Range(9.812 * MB, 128 * MB)),
}
SGL_DEFAULT = {ws: (1 * MB, 1 * MB, 16 * MB) for ws in range(2, 17)}
SGL_WORKSPACE = 16 * MiB  # SGLANG_CUSTOM_ALL_REDUCE_V2_MAX_SIZE_KB's default


def _mc_sm90(ws: int) -> int | None:
    return None if ws < 4 else 128 // ws


SGLANG = {
    # table key: (graph map, eager map, num_mc_blocks(ws), push blocks, pull blocks(ws), two-shot push threshold)
    "9.0": (SGL_SM90_GRAPH, SGL_SM90_EAGER, _mc_sm90, 132, lambda ws: 64, {}),
    "10.0": (
        SGL_SM100_GRAPH,
        SGL_SM100_EAGER,
        {5: 64, 6: 48, 7: 48, 8: 32, 16: 32}.get,
        148,
        lambda ws: 148 if ws == 2 else 96,
        SGL_SM100_TWO_SHOT_PUSH,
    ),
    "10.7": (
        SGL_SM107_GRAPH,
        SGL_SM107_EAGER,
        {4: 128, 5: 128, 6: 128, 7: 128, 8: 96, 16: 32}.get,
        "sms",
        lambda ws: "min(192,sms)",
        {},
    ),
    "default": (SGL_DEFAULT, SGL_DEFAULT, lambda ws: None, "sms", lambda ws: "sms", {}),
}
SGL_NAMES = ("2shot_push", "1shot_push", "1shot_pull", "2shot_pull_mc", "2shot_pull", "nccl")


def sglang_rows(key: str, ws: int) -> tuple[Heur, Heur]:
    """The (graph, eager) rows as written; ``sglang_sized``: as CustomAllReduceV2.__init__ clips them."""
    graph, eager, *_, push2 = SGLANG[key]
    return pack(*graph[ws], two_shot_push=push2.get(ws, 0)), pack(*eager[ws], two_shot_push=push2.get(ws, 0))


def sglang_sized(key: str, ws: int) -> tuple[Heur, Heur]:
    rows = sglang_rows(key, ws)
    align = lambda n: -(-max(int(n), 1024) // 1024) * 1024  # noqa: E731
    pull = align(min(max(max(h.pull, h.two_shot, h.mc.max_bytes) for h in rows), SGL_WORKSPACE))
    slot = lambda n: 32 * -(-n // (16 * ws))  # noqa: E731
    push = align(min(max(max(h.push, slot(h.two_shot_push)) for h in rows), SGL_WORKSPACE))
    fits = ws * 16 * (push // 32)
    clip = lambda h: Heur(  # noqa: E731
        min(h.push, push), min(h.pull, pull), min(h.two_shot, pull), h.mc.clip(pull), min(h.two_shot_push, fits)
    )
    return clip(rows[0]), clip(rows[1])


def sglang_rule(key: str, ws: int, mode: str, n: int, multicast: bool, available: Iterable[str]) -> str:
    """SGLang 0.5.23's choice; an algorithm missing from ``available`` is skipped like a failed check."""
    mc_blocks = SGLANG[key][2]
    h = sglang_sized(key, ws)[0 if mode == "graph" else 1]
    ok = set(available)
    if "1shot_push" in ok and n <= h.push:
        return "1shot_push"
    if "2shot_push" in ok and n <= h.two_shot_push:
        return "2shot_push"
    if "1shot_pull" in ok and n <= h.pull:
        return "1shot_pull"
    if "2shot_pull_mc" in ok and multicast and mc_blocks(ws) is not None and h.mc.contains(n):
        return "2shot_pull_mc"
    if "2shot_pull" in ok and n <= h.two_shot:
        return "2shot_pull"
    return "nccl"


def sglang_bounds(key: str) -> set[int]:
    out: set[int] = {SGL_WORKSPACE}
    for ws in SGLANG[key][0]:
        for h in (*sglang_rows(key, ws), *sglang_sized(key, ws)):
            out |= {h.push, h.pull, h.two_shot, h.two_shot_push, int(h.mc.min_bytes), int(h.mc.max_bytes)}
    return out


# ---------------------------------------------------------------- sizes


def dense_sizes(bounds: Iterable[int], seed: int) -> list[int]:
    """0, 1, every bound and its neighbours (and those rounded to 16), powers of two, random sizes."""
    sizes = {0, 1}
    for b in bounds:
        sizes |= {b - 1, b, b + 1}
    sizes |= {1 << k for k in range(31)}  # 1 B .. 1 GiB
    rng = random.Random(seed)
    sizes |= {rng.randrange(0, 256 * MiB) for _ in range(300)}
    sizes |= {rng.randrange(0, 64 * KiB) for _ in range(100)}
    sizes |= {s - s % 16 for s in list(sizes)}  # aligned neighbours of everything
    return sorted(s for s in sizes if s >= 0)


# ---------------------------------------------------------------- conformance


@pytest.mark.parametrize("arch", [*VLLM_CUSTOM_AR, None], ids=lambda a: a or "default")
@pytest.mark.parametrize("multicast", [True, False], ids=["mc", "no-mc"])
def test_vllm_conformance(arch: str | None, multicast: bool) -> None:
    refs = reference_set("vllm")
    table = refs.tables[arch] if arch else refs.resolve("8.0")
    if arch:
        fi = {int(mb * MiB) for mb in VLLM_FLASHINFER_MB[arch].values()} | {
            int(mb * MiB) for mb in VLLM_MNNVL_MB.values()
        }
        bounds = {*VLLM_CUSTOM_AR[arch].values(), *VLLM_SYMM_MEM[arch].values(), *fi, 8 * MiB}
    else:
        bounds = {8 * MiB}
    sizes = dense_sizes(bounds, seed=7)
    checked = 0
    for ws in (2, 3, 4, 6, 8, 16):
        for mode in MODES:
            for dtype in VLLM_DTYPES:
                for n in sizes:
                    available = catalog_available(ws, dtype, n, multicast)
                    got = decide(table, n, ws, mode, available, multicast=multicast).algorithm
                    want = vllm_rule(arch, ws, dtype, n, multicast)
                    assert got == want, f"vllm {arch} ws={ws} {mode} {dtype} mc={multicast} {n} B: {got} != {want}"
                    checked += 1
    assert checked > 10_000


@pytest.mark.parametrize("key", list(SGLANG))
@pytest.mark.parametrize("multicast", [True, False], ids=["mc", "no-mc"])
def test_sglang_conformance(key: str, multicast: bool) -> None:
    refs = reference_set("sglang")
    table = refs.default if key == "default" else refs.tables[key]
    assert table is not None
    available = frozenset(SGL_NAMES) - (set() if multicast else {"2shot_pull_mc"})
    sizes = dense_sizes(sglang_bounds(key), seed=11)
    graph, eager, *_ = SGLANG[key]
    assert set(graph) == set(eager)
    for ws in graph:
        for mode in MODES:
            for n in sizes:
                got = decide(table, n, ws, mode, available).algorithm
                want = sglang_rule(key, ws, mode, n, multicast, available)
                assert got == want, f"sglang {key} ws={ws} {mode} mc={multicast} {n} bytes: {got} != {want}"


@pytest.mark.parametrize("key", list(SGLANG))
def test_sglang_bands_hold_what_runs_with_and_without_multicast(key: str) -> None:
    """SGLang's algorithms share every run-time condition but multicast: a band names the algorithm with
    multicast and, where that one needs it, the one without; nothing else."""
    refs = reference_set("sglang")
    table = refs.default if key == "default" else refs.tables[key]
    assert table is not None
    for plan in table.plans:
        for band in (*plan.bands, *plan.written):
            assert 1 <= len(band.candidates) <= 2
            if len(band.candidates) == 2:
                assert SPECS[band.candidates[0]].conditions.multicast
                assert not SPECS[band.candidates[1]].conditions.multicast


def test_sglang_float_range_starts_at_its_ceiling() -> None:
    """Range(2.438 * MB, ...) first matches at 2556429, while the thresholds truncate to 2556428."""
    table = reference_set("sglang").tables["10.7"]
    edge = int(2.438 * MB)
    assert edge == 2556428
    no_multicast = frozenset(SGL_NAMES) - {"2shot_pull_mc"}
    assert decide(table, edge, 8, "eager").algorithm == "1shot_push"
    assert decide(table, edge + 1, 8, "eager").algorithm == "2shot_pull_mc"
    assert decide(table, edge + 1, 8, "eager", no_multicast).algorithm == "2shot_pull"


# ---------------------------------------------------------------- shape and provenance


def test_reference_names_and_cache() -> None:
    assert REFERENCES == ("vllm", "sglang")
    for name in REFERENCES:
        assert reference_set(name) is reference_set(name)
        assert reference_set(name).name == name
    with pytest.raises(ArtuneError) as err:
        reference_set("trtllm")
    assert "trtllm" in str(err.value) and "vllm" in str(err.value) and "sglang" in str(err.value)


def test_vllm_tables_shape() -> None:
    refs = reference_set("vllm")
    assert set(refs.tables) == {"9.0", "10.0", "10.3", "10.7"}
    assert refs.default is not None and refs.rules == "vllm"
    for table in [*refs.tables.values(), refs.default]:
        assert table.origin == "reference:vllm" and table.rules == "vllm"
        assert table.platform.kind == "cuda"
        sizes = {2, 4, 6, 8} | set(VLLM_FLASHINFER_MB.get(table.platform.arch, {}))
        assert {(p.world_size, p.mode) for p in table.plans} == {(ws, m) for ws in sizes for m in MODES}
        for ws in sizes:
            assert table.plan(ws, "graph").bands == table.plan(ws, "eager").bands
        assert "all_reduce_utils.py" in table.provenance.notes
    for arch in ("9.0", "10.0", "10.3"):
        assert refs.tables[arch].provenance.source == "published"
    rubin = refs.tables["10.7"].provenance
    assert (rubin.source, rubin.inherited_from) == ("inherited", "10.3")
    assert "without measuring" in rubin.notes
    # 10.7 copies 10.3's custom all-reduce and symmetric-memory rows, not its FlashInfer ones
    assert refs.tables["10.7"].plan(6, "graph") == refs.tables["10.3"].plan(6, "graph")
    assert refs.tables["10.7"].plan(8, "graph") != refs.tables["10.3"].plan(8, "graph")


def test_vllm_rows_as_written_and_why_they_differ() -> None:
    """9.0 ws=6 (no FlashInfer row): the plan runs custom_ar below its row, as written; on a machine without
    multicast custom_ar keeps its 8 MiB default, and that plan keeps the row's text and says why."""
    table = reference_set("vllm").tables["9.0"]
    plan = table.plan(6, "eager")
    assert plan.multicast is None and table.plan(6, "eager", multicast=True) is plan
    assert plan.bands[0].candidates == ("custom_ar", "symm_mem_multimem") and plan.bands[0].upto == MiB // 2 - 1
    assert not plan.written  # what runs is what the rows say
    bare = table.plan(6, "eager", multicast=False)
    assert bare.multicast is False and bare.bands == (Band(8 * MiB - 1, ("custom_ar",)),)
    assert bare.written == plan.bands and any("without NVLink multicast" in note for note in bare.notes)
    fp16 = decide(table, MiB, 6, "eager", catalog_available(6, "float16", MiB), multicast=True)
    assert fp16.algorithm == "nccl"  # symmetric memory is bf16-only, and custom_ar stops at its row
    bf16 = decide(table, MiB, 6, "eager", catalog_available(6, "bfloat16", MiB, False), multicast=False)
    assert bf16.algorithm == "custom_ar" and "multicast=off" in bf16.reason and "as written" in bf16.reason
    ws2 = reference_set("vllm").tables["9.0"].plan(2, "eager")  # 64 MiB row, capped at 8 MiB; FlashInfer first
    assert ws2.bands[0].candidates[0] == "flashinfer_ar"
    assert any("caps custom_ar" in note for note in ws2.notes)


def test_sglang_tables_shape_and_blocks() -> None:
    refs = reference_set("sglang")
    assert set(refs.tables) == {"9.0", "10.0", "10.7"}
    assert refs.default is not None
    for key, (graph, _, mc_blocks, push, pull, _push2) in SGLANG.items():
        table = refs.default if key == "default" else refs.tables[key]
        assert table.origin == "reference:sglang"
        assert table.provenance.source == "published"
        assert {(p.world_size, p.mode) for p in table.plans} == {(ws, m) for ws in graph for m in MODES}
        for plan in table.plans:
            expected = {
                "1shot_push": push,
                "2shot_push": push,
                "1shot_pull": pull(plan.world_size),
                "2shot_pull": pull(plan.world_size),
                "2shot_pull_mc": mc_blocks(plan.world_size),
            }
            for name in plan.algorithms:
                if name == "nccl":
                    continue
                want = expected[name]
                assert plan.params_for(name) == ({} if want is None else {"blocks": want}), (key, plan, name)
    assert refs.tables["10.0"].plan(4, "graph").params_for("2shot_push") == {"blocks": 148}


def test_sglang_arch_mapping() -> None:
    refs = reference_set("sglang")
    assert refs.resolve("9.0") is refs.tables["9.0"]
    assert refs.resolve("10.7") is refs.tables["10.7"]
    assert refs.resolve("10.0") is refs.tables["10.0"]
    b300 = refs.resolve("10.3")
    assert b300 == refs.tables["10.0"] and b300.borrowed
    other = refs.resolve("8.0")
    assert other == refs.default and other.borrowed
    assert refs.resolve("12.0") == refs.default  # no family chain: SGLang's own dispatch
    # the engine's choice is visible in every decision it makes
    decision = decide(b300, 1 * MiB, 4, "eager")
    assert decision.algorithm == "2shot_push"
    assert "SGLang's dispatch on the capability gives it arch 10.0's" in decision.reason
    assert "the engine runs its own default there" in decide(other, 1 * MiB, 2, "eager").reason


def test_sglang_runs_nccl_where_it_has_no_config_and_above_its_workspace() -> None:
    refs = reference_set("sglang")
    decision = decide(refs.tables["10.0"], 1 * MiB, 12, "eager")
    assert decision.algorithm == "nccl" and "no custom all-reduce v2 config for world size 12" in decision.reason
    above = decide(refs.tables["9.0"], 20 * MiB, 2, "eager")
    assert above.algorithm == "nccl"
    assert "as written: 1shot_push (16MiB, 32MiB]" in above.reason and "16MiB default workspace" in above.reason


def test_vllm_unknown_arch_uses_default() -> None:
    refs = reference_set("vllm")
    table = refs.resolve("8.0")
    assert table == refs.default and table.borrowed
    assert "no fallback between arches" in table.borrowed[0]
    decision = decide(table, 4 * MiB, 4, "graph", catalog_available(4, "bfloat16", 4 * MiB))
    assert decision.algorithm == "custom_ar"
    assert "has no row for arch 8.0" in decision.reason
    assert decide(table, 8 * MiB, 4, "graph").algorithm == "nccl"


@pytest.mark.parametrize("ws", [3, 5, 7, 12])
def test_vllm_unsupported_world_sizes_use_nccl(ws: int) -> None:
    table = reference_set("vllm").tables["9.0"]
    n = 1 * MiB
    decision = decide(table, n, ws, "eager", catalog_available(ws, "bfloat16", n))
    assert decision.algorithm == "nccl" and f"at world size {ws}" in decision.reason


def test_vllm_issue_examples() -> None:
    """The 8 MiB cap (exclusive) sends 9.0 ws=2 past it to symmetric memory where FlashInfer is off."""
    from artune.formats.vllm.reference import DISPATCH, _provenance
    from artune.formats.vllm.rules import table_set

    off = table_set(replace(DISPATCH, flashinfer_on=False), "test", _provenance, _provenance("9.0"))
    for n, want in ((8 * MiB - 16, "custom_ar"), (8 * MiB, "symm_mem_two_shot"), (63 * MiB, "symm_mem_two_shot")):
        assert decide(off.tables["9.0"], n, 2, "eager", catalog_available(2, "bfloat16", n)).algorithm == want
    decision = decide(off.tables["9.0"], 63 * MiB, 2, "eager", catalog_available(2, "bfloat16", 63 * MiB))
    assert "as written: custom_ar" in decision.reason and "caps custom_ar" in decision.reason


# ---------------------------------------------------------------- files


@pytest.mark.parametrize("name", REFERENCES)
def test_round_trip_through_toml(name: str) -> None:
    refs = reference_set(name)
    assert refs.default is not None
    for table in [*refs.tables.values(), refs.default]:
        back = loads_table(dumps_table(table), origin=f"reference:{name}")
        assert back == table
        assert digest(back) == digest(table)
