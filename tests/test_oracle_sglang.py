"""artune decides as SGLang's released code does: the oracle (``src/artune/oracles/sglang.py``) runs the release's own
``CustomAllReduceV2`` on stand-ins for the GPU, probe by probe, beside artune's reading of the same release.

The wheels come from the package registry once (``artune.formats.releases``); where one is not cached and the
registry cannot be reached, the test skips and says so. The full matrix, every release, is
``python src/artune/oracles/sglang.py``.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from artune.errors import ReleaseUnavailable
from artune.formats.references import reference_set
from artune.formats.releases import fetch_release
from artune.oracles import Probe, decide_all
from artune.oracles import sglang as oracle
from artune.table.decide import decide

MiB = 1 << 20


def release(version: str) -> Path:
    try:
        return fetch_release("sglang", version)
    except ReleaseUnavailable as err:
        pytest.skip(f"sglang=={version} is not cached and cannot be downloaded: {err}")


@pytest.mark.parametrize(
    ("version", "minimum", "algorithms"),
    [
        ("0.5.23", 5000, {"1shot_push", "2shot_push", "1shot_pull", "2shot_pull_mc", "2shot_pull", "nccl"}),
        ("0.5.20", 5000, {"1shot_push", "1shot_pull", "2shot_pull_mc", "2shot_pull", "nccl"}),
        ("0.5.10", 1000, {"custom_ar_v1", "nccl"}),  # v2 is opt-in: SGLang runs its legacy CustomAllreduce
    ],
)
def test_every_probe_decides_as_the_release(version: str, minimum: int, algorithms: set[str]) -> None:
    root = release(version)
    probes = oracle.probes(root)
    engine = oracle.engine_decisions(root, probes)
    ours = oracle.artune_decisions(root, probes)
    wrong = [(p, e, a) for p, e, a in zip(probes, engine, ours, strict=True) if e != a]
    assert not wrong, f"{len(wrong)} of {len(probes)} differ, first: {wrong[:5]}"
    assert len(probes) >= minimum
    assert set(Counter(engine)) == algorithms  # the probes reach every algorithm the release runs


@pytest.mark.parametrize(
    ("version", "env", "algorithms"),
    [
        # switched back to the legacy class: custom_ar_v1 at its 2, 4, 6 and 8 ranks, to its 8 MiB buffer
        ("0.5.23", {"SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2": "0"}, {"custom_ar_v1", "nccl"}),
        # v2 switched on where it was opt-in
        ("0.5.10", {"SGLANG_USE_JIT_ALL_REDUCE": "1"}, {"1shot_push", "1shot_pull", "2shot_pull", "nccl"}),
        # a smaller workspace clips v2's rows further
        ("0.5.23", {"SGLANG_CUSTOM_ALL_REDUCE_V2_MAX_SIZE_KB": "4096"}, {"1shot_push", "2shot_pull", "nccl"}),
    ],
)
def test_the_class_sglang_picks_follows_the_environment_as_the_release_reads_it(
    version: str, env: dict[str, str], algorithms: set[str]
) -> None:
    root = release(version)
    probes = oracle.probes(root, ["10.0"], env=env)
    engine = oracle.engine_decisions(root, probes, env)
    ours = oracle.artune_decisions(root, probes, env)
    wrong = [(p, e, a) for p, e, a in zip(probes, engine, ours, strict=True) if e != a]
    assert not wrong, f"{len(wrong)} of {len(probes)} differ, first: {wrong[:5]}"
    assert algorithms <= set(engine) and (("custom_ar_v1" in engine) == ("custom_ar_v1" in algorithms))


def test_verify_engine_probes_each_switch_the_dispatch_tests_and_memory_saver_graphs_run_eager() -> None:
    """0.5.23's dispatch tests two ``EnvBool`` switches, found in the evaluated code (no list names them), and
    verify-engine probes each at its other value. By construction ``SGLANG_MEMORY_SAVER_CUDA_GRAPH=1`` turns
    ``_is_graph_mode_supported`` off, so a graph-captured call runs what an eager one does: artune's reading took
    graph mode's rows there (2shot_pull where SGLang runs 1shot_push at 9.0 ws=3, 1.25 MiB) until it read that."""
    root = release("0.5.23")
    saver, legacy = (("SGLANG_MEMORY_SAVER_CUDA_GRAPH", "1"),), (("SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2", "0"),)
    assert set(oracle._switches(root)) == {(saver, ""), (legacy, "")} and oracle.unprobed(root) == []
    probes = [p for p in oracle.switch_probes(root) if p.arch == "9.0" and p.hosts == 1 and p.world_size in (3, 8)]
    assert {p.env for p in probes} == {saver, legacy}
    engine = oracle.engine_decisions(root, probes)
    assert oracle.artune_decisions(root, probes) == engine
    answers = dict(zip(((p.world_size, p.mode, p.multicast, p.nbytes, p.env) for p in probes), engine, strict=True))
    saved = [k for k in answers if k[4] == saver and k[1] == "graph"]
    assert saved and all(answers[k] == answers[(k[0], "eager", *k[2:])] for k in saved)
    assert answers[(3, "graph", True, 1310736, saver)] == "1shot_push"
    assert oracle.topology(probes[0]).startswith("1 host SGLANG_")


def test_memory_saver_graphs_run_eager_where_the_release_keeps_the_switch_as_tms_cudagraph() -> None:
    """0.5.16 has no ``_is_graph_mode_supported``: its v2 class keeps the switch as ``self.tms_cudagraph``, and
    ``capture()`` sets ``_graph_mode_allowed = not self.tms_cudagraph``. By construction a graph-captured call
    under ``SGLANG_MEMORY_SAVER_CUDA_GRAPH=1`` then runs what an eager one does (1shot_push at 9.0 ws=3,
    1.25 MiB, where graph mode's rows say 2shot_pull), and artune's reading answers the same."""
    root = release("0.5.16")
    saver = (("SGLANG_MEMORY_SAVER_CUDA_GRAPH", "1"),)
    probes = [
        p
        for p in oracle.switch_probes(root)
        if p.env == saver and p.arch == "9.0" and p.hosts == 1 and p.world_size == 3
    ]
    engine = oracle.engine_decisions(root, probes)
    assert oracle.artune_decisions(root, probes) == engine
    answers = dict(zip(((p.mode, p.multicast, p.nbytes) for p in probes), engine, strict=True))
    assert answers[("graph", True, 1310736)] == answers[("eager", True, 1310736)] == "1shot_push"


def test_the_legacy_class_runs_where_v2_declines_as_the_release_picks_it() -> None:
    """0.5.23 with SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2=0: the legacy class's own gates, as the release runs them."""
    root = release("0.5.23")
    env = {"SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2": "0"}
    cases = [
        (Probe("9.0", 2, "eager", True, 8 * MiB), "custom_ar_v1"),  # _MAX_CAR_SIZE: 8 MiB, inclusive
        (Probe("9.0", 2, "eager", True, 8 * MiB + 16), "nccl"),
        (Probe("9.0", 6, "graph", True, 1 * MiB), "custom_ar_v1"),
        (Probe("9.0", 3, "graph", True, 1 * MiB), "nccl"),  # _SUPPORTED_WORLD_SIZES = [2, 4, 6, 8]
        (Probe("9.0", 8, "eager", True, 1 * MiB + 8), "nccl"),  # 16-byte sizes only
        (Probe("9.0", 8, "eager", True, 1 * MiB, hosts=2, nvlink="rack"), "nccl"),  # one node only
    ]
    probes = [p for p, _ in cases]
    assert oracle.engine_decisions(root, probes, env) == [want for _, want in cases]
    assert oracle.artune_decisions(root, probes, env) == [want for _, want in cases]


@pytest.mark.parametrize("version", ["0.5.23", "0.5.10"])
def test_what_the_reading_says_of_pcie_gpus_is_what_the_release_runs_there(version: str) -> None:
    """No table set has a PCIe machine (S108 says what runs there): the reading's tables for it, held to the
    release's own code on PCIe-only stand-ins, every arch, world size and mode."""
    from artune import catalog
    from artune.formats.sglang.read import _locate
    from artune.formats.sglang.release import Release

    root = release(version)
    read = Release(_locate(str(root)))  # type: ignore[arg-type]
    tables = read.pcie()
    probes = [p for p in oracle.probes(root, racks=()) if p.world_size <= 8]
    engine = oracle.engine_decisions(root, probes, pcie=True)
    resolve = {arch: tables[read.served.get(arch, arch)] for arch in oracle.ARCHS}
    ours = [
        decide(
            resolve[p.arch],
            p.nbytes,
            p.world_size,
            p.mode,
            catalog.available(p.world_size, p.dtype, p.nbytes, p.multicast),
        ).algorithm
        for p in probes
    ]
    wrong = [(p, e, a) for p, e, a in zip(probes, engine, ours, strict=True) if e != a]
    assert not wrong, f"{len(wrong)} of {len(probes)} differ, first: {wrong[:5]}"
    assert set(engine) == {"custom_ar_v1", "nccl"}
    assert {p.world_size for p, e in zip(probes, engine, strict=True) if e == "custom_ar_v1"} == {2}


def test_the_oracle_runs_the_release_not_artune() -> None:
    """Facts of 0.5.23 the engine's own code answers: the workspace clip, multicast, a float range's ceiling."""
    root = release("0.5.23")
    cases = [
        (Probe("10.0", 8, "graph", True, 4 * MiB), "2shot_push"),
        (Probe("9.0", 2, "eager", True, 16 * MiB), "1shot_push"),
        (Probe("9.0", 2, "eager", True, 16 * MiB + 16), "nccl"),  # the rows say 1shot_push to 32 MB
        (Probe("10.7", 8, "eager", True, 2556432), "2shot_pull_mc"),  # Range(2.438 * MB, ...) starts at 2556429
        (Probe("10.7", 8, "eager", False, 2556432), "2shot_pull"),
        (Probe("10.7", 8, "eager", True, 2556416), "1shot_push"),  # int(2.438 * MB) = 2556428
        (Probe("10.0", 12, "eager", True, 1 * MiB), "nccl"),  # no config at 12 ranks
        (Probe("10.0", 8, "eager", True, 1 * MiB + 8), "nccl"),  # not a multiple of 16 bytes
        (Probe("10.3", 4, "graph", True, 4 * MiB), "2shot_push"),  # 10.3 runs the SM100 configs
        (Probe("12.0", 16, "graph", True, 2 * MiB), "2shot_pull"),  # the default configs
    ]
    assert oracle.engine_decisions(root, [p for p, _ in cases]) == [want for _, want in cases]


def test_reference_sglang_decides_as_release_0_5_23() -> None:
    root = release("0.5.23")
    refs = reference_set("sglang")
    probes = oracle.probes(root)
    engine = oracle.engine_decisions(root, probes)
    ours = decide_all(refs, probes)
    wrong = [(p, e, a) for p, e, a in zip(probes, engine, ours, strict=True) if e != a]
    assert not wrong, f"{len(wrong)} of {len(probes)} differ, first: {wrong[:5]}"


def test_the_reader_keeps_the_rows_as_written_and_says_why_they_differ() -> None:
    from artune.formats import read_engine

    tables = read_engine("sglang", str(release("0.5.23"))).tables
    plan = tables.resolve("10.7").plan(2, "eager")
    assert plan is not None and plan.notes
    assert plan.spans() == [(0, 16 * MiB, ("1shot_push",)), (16 * MiB + 1, None, ("nccl",))]
    assert plan.spans(as_written=True)[0] == (0, 128 * MiB, ("1shot_push",))
    decision = decide(tables.resolve("10.7"), 64 * MiB, 2, "eager")
    assert decision.algorithm == "nccl"
    assert "as written: 1shot_push (16MiB, 128MiB]" in decision.reason and "16MiB default workspace" in decision.reason
    assert "10.0" in " ".join(tables.resolve("10.3").borrowed)  # SGLang's dispatch, not a family chain


# ------------------------------------------------------------------ the writer, through SGLang's own code

CONFIGS = "sglang/srt/distributed/device_communicators/configs/custom_all_reduce_v2.py"


def _pasted(root: Path, tmp_path: Path, text: str) -> Path:
    """A copy of the release with the exported function in place of its own, as a maintainer pastes it."""
    import ast
    import shutil

    copy = tmp_path / "release"
    shutil.copytree(root, copy)
    path = copy / CONFIGS
    lines = path.read_text().splitlines(keepends=True)
    name = next(line for line in text.splitlines() if line.startswith("def ")).split("(")[0].removeprefix("def ")
    (fn,) = [n for n in ast.parse("".join(lines)).body if isinstance(n, ast.FunctionDef) and n.name == name]
    first = min(d.lineno for d in fn.decorator_list) if fn.decorator_list else fn.lineno
    path.write_text("".join(lines[: first - 1]) + text + "".join(lines[fn.end_lineno :]))
    return copy


@pytest.mark.parametrize("arch", ["9.0", "10.0", "10.7"])
def test_an_exported_reference_table_runs_in_the_release_as_the_original(tmp_path: Path, arch: str) -> None:
    """export(reference:sglang) pasted into 0.5.23's configs file: SGLang's own code decides every probe as before."""
    from artune.formats.sglang.write import export_sglang

    root = release("0.5.23")
    out = export_sglang(reference_set("sglang").tables[arch], "test")
    assert out.dropped == []
    probes = oracle.probes(root, [arch])
    assert oracle.engine_decisions(_pasted(root, tmp_path, out.text), probes) == oracle.engine_decisions(root, probes)


def test_a_measured_table_with_two_shot_push_runs_in_the_release_as_artune_decides(tmp_path: Path) -> None:
    """A table SGLang's own rows never had (2shot_push at 2 ranks, multicast at 4), exported and pasted in: the
    release runs what artune decides from the table, at every probe of those world sizes."""
    from artune.formats.sglang.write import export_sglang
    from artune.table.family import TableSet
    from artune.table.types import Band, Plan, Platform, Provenance, Table, freeze_params

    KiB = 1 << 10
    blocks = freeze_params({n: {"blocks": 96} for n in ("1shot_push", "2shot_push", "2shot_pull", "2shot_pull_mc")})
    two = (Band(48 * KiB, ("1shot_push",)), Band(3 * MiB, ("2shot_push",)), Band(12 * MiB, ("2shot_pull",)))
    four = (
        Band(96 * KiB, ("1shot_push",)),
        Band(6 * MiB, ("2shot_pull_mc", "2shot_pull")),
        Band(8 * MiB, ("2shot_pull",)),
    )
    plans = tuple(
        Plan(ws, mode, bands, "nccl", blocks) for ws, bands in ((2, two), (4, four)) for mode in ("graph", "eager")
    )
    table = Table(Platform("cuda", "10.0"), Provenance("measured", device="test"), plans, rules="sglang")
    out = export_sglang(table, "test")
    assert out.dropped == []
    pasted = _pasted(release("0.5.23"), tmp_path, out.text)
    probes = oracle.probes(pasted, ["10.0"], [2, 4], racks=())  # around the pasted rows' own bounds
    engine = oracle.engine_decisions(pasted, probes)
    ours = decide_all(TableSet("test", "cuda", {"10.0": table}, rules="sglang"), probes)
    wrong = [(p, e, a) for p, e, a in zip(probes, engine, ours, strict=True) if e != a]
    assert not wrong, f"{len(wrong)} of {len(probes)} differ, first: {wrong[:5]}"
    assert {"1shot_push", "2shot_push", "2shot_pull_mc", "2shot_pull", "nccl"} <= set(engine)


def test_the_oracle_runs_a_checkout_and_refuses_a_file_alone(tmp_path: Path) -> None:
    """``verify-engine sglang:PATH``: a checkout's ``python/sglang`` runs as the wheel's ``sglang`` does; a configs
    file alone holds no communicator to run, and the oracle says so (OracleGap) rather than fail on it."""
    import shutil

    from artune.errors import OracleGap

    shutil.copytree(release("0.5.23") / "sglang", tmp_path / "python" / "sglang")
    probes = oracle.probes(tmp_path, ["10.0"], [2, 8], racks=())
    assert oracle.engine_decisions(tmp_path, probes) == oracle.artune_decisions(tmp_path, probes)
    with pytest.raises(OracleGap, match="give an SGLang checkout or release"):
        oracle.probes(tmp_path / "python" / CONFIGS, ["10.0"])
