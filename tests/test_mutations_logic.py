"""Changed dispatch logic, each with its answer known by construction: vLLM's newest release edited in a copy.

``tests/test_mutations_vllm.py`` holds the machinery (the release cached once, the edits made by function
name); here each mutation is one that artune once answered wrongly or silently, and the answer it must give
now is stated beside it:

- the engine's own raise is a finding: with ``CustomAllreduce``'s world-size test made ``2 <= world_size <=
  6``, its ``__init__`` looks world sizes 3 and 5 up in ``_DEFAULT_MNNVL_ALL_GATHER_MAX_SIZES``, which holds
  neither: vLLM raises ``KeyError`` at start-up there, on every arch, every machine, both modes;
- an ``assert`` the dispatch fails on every call at one world size: vLLM's first all-reduce raises there;
- no fixed list overrides the evaluated code: symmetric memory's row lookup wrapped in ``try/except
  KeyError`` with a 4 MiB default runs ``symm_mem_two_shot`` at world size 3 (9.0 lists no multimem there)
  up to 4 MiB; ``_SUPPORTED_WORLD_SIZES`` with 3 and 5 (and their all-gather bounds) runs ``custom_ar`` there
  below its 8 MiB buffer.

Each is decided by vLLM's own code (the oracle) and by artune's reading on the same probes, and they must
agree; the by-construction answer is asserted on the engine's side too, so a mutation that stopped applying
would fail here rather than pass vacuously.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from artune.cli import main
from artune.errors import ReleaseUnavailable
from artune.formats import read_engine
from artune.formats.releases import fetch_release
from artune.oracles import RAISES, Probe
from artune.oracles import vllm as oracle
from artune.sources import open_source, source_findings
from test_mutations_vllm import CUDA, CUSTOM, SYMM, VERSION, Edit, _mutated, inserted

MiB = 1 << 20


def replaced(old: str, new: str) -> Callable[[str], str]:
    """``old`` (found once) replaced by ``new``."""

    def mutate(text: str) -> str:
        assert text.count(old) == 1, old
        return text.replace(old, new)

    return mutate


def _slice(root: Path, sizes: tuple[int, ...] = (2, 3, 4, 5, 6)) -> list[Probe]:
    """The release's probes on one host at ``sizes``, on 9.0 and on an arch no table names (8.0)."""
    return [
        p
        for p in oracle.probes(root, racks=False)
        if p.arch in ("9.0", "8.0") and p.world_size in sizes and p.hosts == 1
    ]


def _agree(root: Path, probes: list[Probe]) -> list[str]:
    """vLLM's answers on ``probes``, after asserting artune's are the same."""
    engine = oracle.engine_decisions(root, probes)
    mine = oracle.artune_decisions(root, probes)
    differ = [(p, e, m) for p, e, m in zip(probes, engine, mine, strict=True) if e != m]
    assert differ == [], differ[:5]
    return engine


RAISING: list[Edit] = [
    (CUSTOM, replaced("if world_size not in CustomAllreduce._SUPPORTED_WORLD_SIZES:", "if not 2 <= world_size <= 6:"))
]


@pytest.fixture(scope="module")
def release() -> Path:
    try:
        fetch_release("flashinfer-python", oracle.FLASHINFER)
        return fetch_release("vllm", VERSION)
    except ReleaseUnavailable as err:
        pytest.skip(f"vllm=={VERSION} is not cached and cannot be downloaded: {err}")


@pytest.fixture
def readings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ARTUNE_READINGS_DIR", str(tmp_path / "readings"))
    return tmp_path


def test_the_engines_own_raise_is_a_finding_in_check_explain_and_verify(
    release: Path, readings: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _mutated(release, readings, RAISING)
    lookup = next(
        i
        for i, line in enumerate((root / CUSTOM).read_text().splitlines(), 1)
        if "_DEFAULT_MNNVL_ALL_GATHER_MAX_SIZES[" in line
    )
    probes = _slice(root)
    engine = _agree(root, probes)
    # by construction: every probe at 3 and 5 raises, none elsewhere
    assert {e for p, e in zip(probes, engine, strict=True) if p.world_size in (3, 5)} == {RAISES}
    assert RAISES not in {e for p, e in zip(probes, engine, strict=True) if p.world_size not in (3, 5)}

    findings = read_engine("vllm", str(root)).findings
    found = [f for f in findings if f.code == "E203"]
    assert sorted(f.world_size for f in found) == [3, 5]
    holes = [f for f in findings if f.code == "E201"]  # no longer 'nccl runs there' where vLLM raises
    assert holes and all(
        f.message.endswith("except at world sizes 3, 5, where vLLM raises instead (E203)") for f in holes
    )
    for f in found:
        assert f.source == f"{root}/{CUSTOM}:{lookup}" and f.severity == "error"
        assert f"vLLM raises KeyError at world size {f.world_size} (custom_all_reduce.py:{lookup}" in f.message
        assert f.message.endswith("it fails at start-up") and {"9.0", "default"} <= set(f.arch.split(", "))

    for arch in ("9.0", "8.0"):
        args = ["explain", "--table", f"vllm:{root}", "--arch", arch, "--world-size", "3", "--size", "1MiB"]
        assert main(args) == 2
        out = capsys.readouterr()
        assert "vLLM raises KeyError at world size 3" in out.err and "it fails at start-up" in out.err
        assert "Traceback" not in out.out + out.err
    assert main(["explain", "--table", f"vllm:{root}", "--arch", "9.0", "--world-size", "4", "--size", "1MiB"]) == 0
    assert "raises" not in capsys.readouterr().out

    # verify-engine on that tree (its probes on one host, to keep the test short): it counts the raise
    kept = _slice(root, (2, 3, 4))
    # the switches' probes have a test of their own
    monkeypatch.setattr(oracle, "ORACLE", replace(oracle.ORACLE, probes=lambda root: kept, extra_probes=None))
    status = main(["verify-engine", f"vllm:{root}", "--platform", "cuda"])
    out = capsys.readouterr()
    assert status in (0, 1) and "Traceback" not in out.out + out.err, out
    counted = re.search(r"the engine ran: .*\braises (\d+)", out.out)
    assert counted and int(counted.group(1)) == sum(p.world_size == 3 for p in kept)


def test_an_assert_on_every_all_reduce_is_the_engines_answer(release: Path, readings: Path) -> None:
    root = _mutated(
        release, readings, [(CUDA, inserted("CudaCommunicator", "all_reduce", "assert self.world_size != 6"))]
    )
    probes = _slice(root, (4, 6))
    engine = _agree(root, probes)
    assert {e for p, e in zip(probes, engine, strict=True) if p.world_size == 6} == {RAISES}
    assert RAISES not in {e for p, e in zip(probes, engine, strict=True) if p.world_size == 4}
    found = [f for f in read_engine("vllm", str(root)).findings if f.code == "E203"]
    assert [f.world_size for f in found] == [6]
    assert "raises AssertionError at world size 6" in found[0].message
    assert found[0].message.endswith("its first all-reduce fails")


def test_a_default_for_a_missing_row_runs_symmetric_memory_where_no_list_says(release: Path, readings: Path) -> None:
    root = _mutated(
        release,
        readings,
        [
            # the world-size test gone: the lookup's default stands for a missing row
            (
                SYMM,
                replaced(
                    "if self.world_size not in SYMM_MEM_ALL_REDUCE_MAX_SIZES[self.device_capability]:", "if False:"
                ),
            ),
            (
                SYMM,
                replaced(
                    "            self.max_size = SYMM_MEM_ALL_REDUCE_MAX_SIZES[self.device_capability][\n"
                    "                self.world_size\n"
                    "            ]",
                    "            try:\n"
                    "                self.max_size = SYMM_MEM_ALL_REDUCE_MAX_SIZES[self.device_capability][\n"
                    "                    self.world_size\n"
                    "                ]\n"
                    "            except KeyError:\n"
                    "                self.max_size = 4 * 1024 * 1024",
                ),
            ),
        ],
    )
    probes = _slice(root, (3,))
    engine = _agree(root, probes)
    # by construction: at 9.0 with multicast, two-shot symmetric memory takes every bf16 size up to its 4 MiB
    # default (and, bf16 only, no fp16 or fp32 one)
    on = {
        (p.dtype, e)
        for p, e in zip(probes, engine, strict=True)
        if p.arch == "9.0" and p.multicast and p.nbytes <= 4 * MiB
    }
    assert on == {("bfloat16", "symm_mem_two_shot"), ("float16", "nccl"), ("float32", "nccl")}
    # E402 names the decisions that moved against the nearest verified release (both evaluated): world size 3
    # on one host at 9.0, and not the default arch's (no symmetric memory row, so nothing moved there)
    tables = read_engine("vllm", str(root)).tables
    e402 = [c for c in tables.resolve("9.0").caveats if c.function == "SymmMemCommunicator.__init__"]
    assert e402 and all(
        f"decisions differ from vLLM {VERSION}'s (both evaluated) at 9.0 ws 3," in c.detail for c in e402
    )
    assert all("default ws" not in c.detail for c in e402)


def test_a_function_changed_without_moving_a_decision_says_so(release: Path, readings: Path) -> None:
    root = _mutated(release, readings, [(CUSTOM, inserted("CustomAllreduce", "should_custom_ar", "unused = 1"))])
    caveats = read_engine("vllm", str(root)).tables.resolve("9.0").caveats
    e402 = [c for c in caveats if c.function == "CustomAllreduce.should_custom_ar"]
    # by construction: an assignment nothing reads moves no decision
    assert e402 and all(c.detail.endswith(f"every decision read is vLLM {VERSION}'s (both evaluated)") for c in e402)


def test_world_sizes_the_release_adds_run_custom_all_reduce(release: Path, readings: Path) -> None:
    root = _mutated(
        release,
        readings,
        [
            (CUSTOM, replaced("_SUPPORTED_WORLD_SIZES = [", "_SUPPORTED_WORLD_SIZES = [3, 5, ")),
            (
                CUSTOM,
                replaced(
                    "    _DEFAULT_MNNVL_ALL_GATHER_MAX_SIZES = {\n",
                    "    _DEFAULT_MNNVL_ALL_GATHER_MAX_SIZES = {\n"
                    "        3: 2 * 1024 * 1024,\n"
                    "        5: 2 * 1024 * 1024,\n",
                ),
            ),
        ],
    )
    probes = _slice(root, (3, 5))
    engine = _agree(root, probes)
    # by construction: custom all-reduce (fully connected GPUs) takes what is below its 8 MiB buffer
    small = {e for p, e in zip(probes, engine, strict=True) if p.nbytes < 8 * MiB}
    assert small == {"custom_ar"}


HALVED_FOR_FP32: list[Edit] = [
    (
        CUSTOM,
        replaced(
            "            return self.batch_invariant or inp_size < self.max_size",
            "            return self.batch_invariant or inp_size < (\n"
            "                self.max_size // 2 if inp.dtype == torch.float32 else self.max_size\n"
            "            )",
        ),
    )
]


def test_a_cap_halved_for_float32_is_read_for_float32(
    release: Path, readings: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _mutated(release, readings, HALVED_FOR_FP32)
    probes = _slice(root, (6,))
    assert {p.dtype for p in probes} == {"bfloat16", "float16", "float32"}
    engine = _agree(root, probes)
    # by construction: without multicast custom all-reduce keeps its 8 MiB buffer at 9.0 ws=6, halved for fp32
    between = {
        (p.dtype, e)
        for p, e in zip(probes, engine, strict=True)
        if p.arch == "9.0" and not p.multicast and 4 * MiB <= p.nbytes < 8 * MiB
    }
    below = {
        (p.dtype, e)
        for p, e in zip(probes, engine, strict=True)
        if p.arch == "9.0" and not p.multicast and p.nbytes < 4 * MiB
    }
    assert between == {("bfloat16", "custom_ar"), ("float16", "custom_ar"), ("float32", "nccl")}
    assert below == {("bfloat16", "custom_ar"), ("float16", "custom_ar"), ("float32", "custom_ar")}
    for dtype, expected in (("float32", "nccl"), ("bfloat16", "custom_ar")):
        args = ["explain", "--table", f"vllm:{root}", "--arch", "9.0", "--world-size", "6", "--size", "6MiB"]
        assert main([*args, "--no-multicast", "--dtype", dtype]) == 0
        assert capsys.readouterr().out.startswith(expected)
    # check reads fp32 too, and says where it decides otherwise than the bf16 tables; fp16 decides as bf16
    notes = [f for f in open_source(f"vllm:{root}").findings if f.code == "V120"]
    assert len(notes) == 1 and notes[0].message.startswith("for float32 messages") and "9.0 ws=6" in notes[0].message


def test_a_raise_for_float32_only_is_checks_finding(release: Path, readings: Path) -> None:
    root = _mutated(
        release,
        readings,
        [(CUDA, inserted("CudaCommunicator", "all_reduce", "assert input_.dtype != torch.float32"))],
    )
    probes = _slice(root, (2,))
    engine = _agree(root, probes)
    # by construction: every fp32 all-reduce raises, no bf16 or fp16 one
    assert {e for p, e in zip(probes, engine, strict=True) if p.dtype == "float32"} == {RAISES}
    assert RAISES not in {e for p, e in zip(probes, engine, strict=True) if p.dtype != "float32"}
    found = [f for f in open_source(f"vllm:{root}").findings if f.code == "E203"]
    assert found and all(f.message.endswith("(for float32 messages)") for f in found)
    assert {f.world_size for f in found} >= {2, 3, 4}


def test_symmetric_memory_taking_fp16_is_not_vetoed_by_a_list(release: Path, readings: Path) -> None:
    root = _mutated(
        release,
        readings,
        [(SYMM, replaced("if inp.dtype != self.dtype:", "if inp.dtype not in (self.dtype, torch.float16):"))],
    )
    probes = _slice(root, (6,))
    engine = _agree(root, probes)
    # by construction: fp16 goes where bf16 goes (symmetric memory too), fp32 never to symmetric memory
    by = {(p.dtype, p.arch, p.multicast, p.mode, p.nbytes): e for p, e in zip(probes, engine, strict=True)}
    assert {e for k, e in by.items() if k[0] == "float16"} >= {"symm_mem_multimem"}
    assert all(by[("float16", *k[1:])] == e for k, e in by.items() if k[0] == "bfloat16")
    assert not {e for k, e in by.items() if k[0] == "float32"} & {"symm_mem_multimem", "symm_mem_two_shot"}


def test_sglang_a_table_builder_that_raises_is_a_caveat_naming_its_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """#50's case: an ``assert False`` at the top of SGLang 0.5.23's ``_sm90_configs``. By construction its
    dispatch raises for every Hopper group, GroupCoordinator catches it, and SGLang runs nccl at every world
    size on 9.0: artune must decide that, and say where and why, never drop the arch silently."""
    from artune.oracles import sglang as sglang_oracle

    monkeypatch.setenv("ARTUNE_READINGS_DIR", str(tmp_path / "readings"))
    try:
        root = fetch_release("sglang", "0.5.23")
    except ReleaseUnavailable as err:
        pytest.skip(f"sglang==0.5.23 is not cached and cannot be downloaded: {err}")
    copy = tmp_path / "sglang"
    configs = "sglang/srt/distributed/device_communicators/configs/custom_all_reduce_v2.py"
    shutil.copytree(root / "sglang", copy / "sglang")
    text = (copy / configs).read_text()
    head = "def _sm90_configs(num_sm: int) -> dict[int, AllReduceConfig]:\n"
    assert text.count(head) == 1
    (copy / configs).write_text(text.replace(head, head + "    assert False\n"))
    line = text[: text.index(head)].count("\n") + 2

    probes = sglang_oracle.probes(copy, ["9.0"], (2, 4, 8), ())
    engine = sglang_oracle.engine_decisions(copy, probes)
    assert set(engine) == {"nccl"}
    assert sglang_oracle.artune_decisions(copy, probes) == engine
    caveats = read_engine("sglang", str(copy)).tables.resolve("9.0").caveats
    named = [c for c in caveats if c.where == f"{copy}/{configs}:{line}"]
    assert named and all("raises AssertionError" in c.detail and c.assumed for c in named), caveats


def test_a_switch_the_release_adds_is_read_from_its_own_envs(release: Path, readings: Path) -> None:
    """A new ``VLLM_CUSTOM_AR_OFF`` in the release's ``envs.py`` (default off) that ``should_custom_ar`` tests.
    By construction: at its default nothing moves; set to 1, custom all-reduce takes no size. The oracle runs
    the release's own ``envs.py``, so it holds the new switch; artune reads it with the same settings."""
    from artune.formats.vllm.read import read_vllm
    from artune.oracles import decide_all

    root = _mutated(
        release,
        readings,
        [
            (
                "vllm/envs.py",
                replaced(
                    "environment_variables: dict[str, Callable[[], Any]] = {\n",
                    "environment_variables: dict[str, Callable[[], Any]] = {\n"
                    '    "VLLM_CUSTOM_AR_OFF": lambda: bool(int(os.getenv("VLLM_CUSTOM_AR_OFF", "0"))),\n',
                ),
            ),
            (
                CUSTOM,
                replaced(
                    "        if self.disabled or self.mnnvl_only or self.world_size > 8:\n            return False\n",
                    "        if self.disabled or self.mnnvl_only or self.world_size > 8:\n            return False\n"
                    "        if envs.VLLM_CUSTOM_AR_OFF:\n            return False\n",
                ),
            ),
        ],
    )
    default = [p for p in _slice(root, (2, 6)) if p.dtype == "bfloat16"]
    assert "custom_ar" in _agree(root, default)
    on = [replace(p, env=(("VLLM_CUSTOM_AR_OFF", "1"),)) for p in default]
    engine = oracle.engine_decisions(root, on)
    assert "custom_ar" not in engine
    found = read_vllm(str(root), {"VLLM_CUSTOM_AR_OFF": "1"})
    assert decide_all(found.tables, on, found.findings) == engine


#: a switch the release adds (declared ``bool`` in ``envs.py``, as vLLM declares each) that ``should_custom_ar``
#: tests: set to 1, custom all-reduce takes no size
CUSTOM_AR_OFF: list[Edit] = [
    (
        "vllm/envs.py",
        replaced(
            "environment_variables: dict[str, Callable[[], Any]] = {\n",
            "environment_variables: dict[str, Callable[[], Any]] = {\n"
            '    "VLLM_CUSTOM_AR_OFF": lambda: bool(int(os.getenv("VLLM_CUSTOM_AR_OFF", "0"))),\n',
        ),
    ),
    ("vllm/envs.py", replaced("if TYPE_CHECKING:\n", "if TYPE_CHECKING:\n    VLLM_CUSTOM_AR_OFF: bool = False\n")),
    (
        CUSTOM,
        replaced(
            "        if self.disabled or self.mnnvl_only or self.world_size > 8:\n            return False\n",
            "        if self.disabled or self.mnnvl_only or self.world_size > 8:\n            return False\n"
            "        if envs.VLLM_CUSTOM_AR_OFF:\n            return False\n",
        ),
    ),
]


def test_verify_engine_probes_each_value_of_a_switch_the_dispatch_tests(
    release: Path, readings: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The new ``VLLM_CUSTOM_AR_OFF`` is found in the evaluated dispatch (no list names it) and probed at its
    other value. By construction vLLM runs custom_ar at its default and never with it set: verify-engine agrees
    while artune reads the switch, and counts every probe where custom_ar ran as a difference under
    ``VLLM_CUSTOM_AR_OFF=1`` (and none elsewhere) once artune's reading ignores it."""
    from artune.formats.vllm import read as reader
    from artune.formats.vllm.switches import tested
    from artune.oracles.verify import verify

    root = _mutated(release, readings, CUSTOM_AR_OFF)
    setting = (("VLLM_CUSTOM_AR_OFF", "1"),)
    assert setting in tested(str(root))
    assert (("VLLM_ALLREDUCE_USE_SYMM_MEM", "0"),) in tested(str(root))  # the release's own switches too
    default = [p for p in _slice(root, (2, 6)) if p.dtype == "bfloat16" and p.arch == "9.0"]
    switched = [
        p
        for p in oracle.switch_probes(root)
        if p.env == setting and p.arch == "9.0" and p.hosts == 1 and p.world_size in (2, 6)
    ]
    engine_default = oracle.engine_decisions(root, [replace(p, env=()) for p in switched])
    assert switched and "custom_ar" in engine_default and "custom_ar" not in oracle.engine_decisions(root, switched)
    monkeypatch.setattr(
        oracle, "ORACLE", replace(oracle.ORACLE, probes=lambda root: default, extra_probes=lambda root: switched)
    )

    result = verify(f"vllm:{root}", platform="cuda")
    assert result.agree, result.differences
    assert ("1 host VLLM_CUSTOM_AR_OFF=1", len(switched), len(switched)) in result.topologies

    real = reader.read_vllm
    monkeypatch.setattr(reader, "read_vllm", lambda path, settings=None, dtype="bfloat16": real(path, None, dtype))
    ignored = verify(f"vllm:{root}", platform="cuda", keep=1000)
    flipped = engine_default.count("custom_ar")
    assert ignored.differ == flipped
    assert ("1 host VLLM_CUSTOM_AR_OFF=1", len(switched), len(switched) - flipped) in ignored.topologies
    assert ("1 host", len(default), len(default)) in ignored.topologies
    assert all("VLLM_CUSTOM_AR_OFF" in probe and ours == "custom_ar" for probe, _e, ours in ignored.differences)


def test_the_variables_the_dispatch_read_are_kept_with_its_reading(release: Path, readings: Path) -> None:
    """A reading kept on disk (``artune.formats.vllm.memo``) says which variables the dispatch read, as the
    evaluation that made it did: a kept reading runs no dispatch, and its switches would be lost otherwise."""
    from artune.formats.vllm.code import GpuGroup, ReleaseCode
    from artune.formats.vllm.read import _files

    files = _files(str(release))
    fresh = ReleaseCode(files)
    fresh.outcome(GpuGroup("10.0", 8), "graph")
    fresh.keep()
    assert {"VLLM_ALLREDUCE_USE_SYMM_MEM", "VLLM_ALLREDUCE_USE_FLASHINFER"} <= fresh.variables()
    assert fresh.variables("rocm") == set()  # no ROCm machine was read
    kept = ReleaseCode(files)
    assert kept.variables() == fresh.variables()


#: symmetric memory's size test kept as a ``functools.partial``, whose truth the evaluator cannot know
PARTIAL: list[Edit] = [
    (SYMM, lambda text: "import functools\nimport operator\n" + text),
    (
        SYMM,
        replaced(
            "        return inp_size <= self.max_size\n",
            "        fits = functools.partial(operator.le, inp_size)\n"
            "        if fits(self.max_size):\n"
            "            return True\n"
            "        return False\n",
        ),
    ),
]


def test_a_test_the_evaluator_cannot_know_is_answered_both_ways(
    release: Path, readings: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's case: symmetric memory's size test kept as a ``functools.partial``, whose truth the evaluator
    cannot know. By construction vLLM runs symm_mem_multimem at 16 MiB on 9.0 ws=6 (under its 9.0 row), so
    artune's 'false' (nccl) is not the answer: explain says both, and which is which."""
    root = _mutated(release, readings, PARTIAL)
    probe = next(
        p
        for p in _slice(root, (6,))
        if (p.arch, p.dtype, p.mode, p.multicast, p.nbytes) == ("9.0", "bfloat16", "eager", True, 16 * MiB)
    )
    assert oracle.engine_decisions(root, [probe]) == ["symm_mem_multimem"]
    args = ["explain", "--table", f"vllm:{root}", "--arch", "9.0", "--world-size", "6", "--size", "16MiB"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert out.startswith("nccl unverified")
    assert "if `fits(self.max_size)` holds, vLLM runs symm_mem_multimem here; artune's nccl takes it as false" in out
    # check names it as a caveat (E401), with what artune assumed
    source = open_source(f"vllm:{root}")
    e401 = [f for f in source_findings(source) if f.code == "E401" and "fits(self.max_size)" in f.message]
    assert e401 and all("artune assumed the condition is false" in f.message for f in e401)


def test_the_review_asks_what_a_test_the_evaluator_cannot_know_decides(release: Path, readings: Path) -> None:
    """The same ``functools.partial`` mutation, reviewed against the release. By construction vLLM runs
    symm_mem_multimem at 16 MiB on 9.0 ws=6 where artune's reading, taking the test as false, runs nccl: the
    review's E401 question names that range with the answer under each outcome, never the false one alone."""
    from artune.review.build import build_review, open_side
    from artune.sizes import parse_size

    root = _mutated(release, readings, PARTIAL)
    probe = Probe("9.0", 6, "eager", True, 16 * MiB)
    assert oracle.engine_decisions(root, [probe]) == ["symm_mem_multimem"]
    review = build_review(open_side("BEFORE", f"vllm=={VERSION}"), open_side("AFTER", f"vllm:{root}"))
    asked = [q for q in review.ranked if q.code == "E401" and "fits(self.max_size)" in q.message]
    assert len(asked) == 1 and 6 in asked[0].world_sizes, asked
    spans = re.findall(
        r"9\.0 ws 6 ([\[(])(\S+), (\S+)([\])]) \(([^)]*)\): (\S+)[^;]*? if it is false, (\S+)[^;]*? if it holds",
        asked[0].message,
    )
    around = [
        (modes, false, true)
        for left, lo, hi, right, modes, false, true in spans
        if parse_size(lo) + (left == "(") <= 16 * MiB and (hi == "inf" or 16 * MiB < parse_size(hi) + (right == "]"))
    ]
    assert around == [("graph, eager", "nccl", "symm_mem_multimem")], asked[0].message
    assert asked[0].answer == f"artune verify-engine vllm:{root}"
