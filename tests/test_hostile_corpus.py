"""A hostile pull request cannot hang a reading, exhaust its runner, run code, leave the tree or print a traceback.

Every case of ``tests/hostile_cases.py`` (bombs, loops, escapes, deep
nesting, code that raises, links out of the tree, FIFOs, sockets, devices,
over vLLM, SGLang and TensorRT-LLM) runs ``artune check`` on a mutated copy
of a real release, under limits small enough for the suite (the default
limits are measured by ``bench/hostile_corpus.py``). Each asserts that the
run ended with its exit status and the coded message naming the file, that
no traceback was printed, that nothing ran (the marker an escape would write
is absent) and that nothing of a file outside the tree was quoted. The
limits themselves (``artune.formats.limits``) are tested on real work: a
child that allocates past ``--max-memory`` or spins past ``--timeout``.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import pytest

from artune.cli import _command, main
from artune.errors import ReleaseUnavailable
from artune.formats import limits
from artune.formats.releases import fetch_release

sys.path.insert(0, str(Path(__file__).resolve().parent))
import hostile_cases as corpus

#: CPU seconds and MiB, far below the defaults. A case that must end at a limit (a loop) gets a short CPU limit, so
#: that it ends there soon, not at the step budget; every other case gets ten times the CPU a fresh reading of its
#: release takes (vLLM, read for three dtypes: 7-10 s quiet, twice that on a loaded machine), so that whatever the
#: machine's speed it ends at the line that asks too much, not at the limit
SUITE_LIMITS = ["--timeout", "100", "--max-memory", "512"]
LOOP_LIMITS = ["--timeout", "8"]
SECRET = "SECRET_TOKEN_0123"


@pytest.fixture(scope="module")
def releases() -> dict[str, Path]:
    try:
        return {
            **{engine: fetch_release(engine, version) for engine, version in corpus.VERSIONS.items()},
            "trtllm": corpus.TRTLLM_FIXTURE,
        }
    except ReleaseUnavailable as err:
        pytest.skip(f"a release of the corpus is not cached and cannot be downloaded: {err}")


def _check(tree: Path, engine: str, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str]:
    code = main(["check", f"{engine}:{tree}", *SUITE_LIMITS, *extra])
    out, err = capsys.readouterr()
    return code, out + err


@pytest.mark.timeout(900)  # a case waits up to ten times its CPU limit on a loaded machine
@pytest.mark.parametrize("case", corpus.CASES, ids=lambda c: c.name)
def test_a_hostile_change_ends_coded_and_runs_nothing(
    case: corpus.Case,
    releases: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ARTUNE_READINGS_DIR", str(tmp_path / "readings"))
    marker = tmp_path / "ran"
    tree = corpus.make_tree(corpus.marked(case, tmp_path, marker), releases[case.engine], tmp_path)
    code, text = _check(tree, case.engine, capsys, *(LOOP_LIMITS if "time limit" in case.expect else ()))
    assert "Traceback" not in text, text[-2000:]
    assert not marker.exists(), f"{case.name}: the file's code ran"
    assert SECRET not in text, f"{case.name}: a file outside the tree was quoted"
    assert re.search(case.expect, text), f"{case.name}: {case.expect!r} not in:\n{text[-3000:]}"
    if code == 1:  # the reading went on past it: a caveat (E401) names the line, or the function changed (E402)
        assert case.status in (1, -1) and re.search(r"warning E40[12]", text), text[-2000:]
    else:  # the reading failed: one coded error line
        assert code == 2 and case.status in (2, -1) and re.search(r"error E42[012]", text), text[-2000:]


# ------------------------------------------------------------------ the limits, on real work


def _spin() -> int:
    total = 0
    while True:  # pure CPU work: only RLIMIT_CPU ends it
        total += 1


def _hoard() -> int:
    limits.reading("hoarder.py")
    kept = []
    while True:  # memory, a MiB at a time: RLIMIT_AS ends it with a MemoryError
        kept.append(bytearray(1 << 20))


def test_a_reading_that_spins_past_its_cpu_time_is_stopped_and_named(capsys: pytest.CaptureFixture[str]) -> None:
    code = limits.run(_spin, limits.Limits(timeout_s=1, max_memory_mib=0), "check")
    err = capsys.readouterr().err
    # its CPU time ends it, or on a machine too loaded to give it a second in ten, the wall clock
    assert (
        code == 2 and "error E421" in err and re.search(r"time limit of 1 s of CPU time|10 times the time limit", err)
    )


def test_a_reading_that_hoards_memory_is_stopped_and_names_its_file(capsys: pytest.CaptureFixture[str]) -> None:
    code = limits.run(_hoard, limits.Limits(timeout_s=0, max_memory_mib=300), "check")
    err = capsys.readouterr().err
    assert code == 2 and "E421" in err and "reading hoarder.py" in err and "out of memory" in err
    assert "Traceback" not in err


def test_the_childs_output_and_status_come_back() -> None:
    def works() -> int:
        print("from the child")
        return 7

    assert limits.run(works, limits.Limits(timeout_s=5, max_memory_mib=512), "check") == 7


def test_no_limits_run_in_this_process() -> None:
    seen: list[int] = []
    limits.run(lambda: seen.append(1) or 0, limits.Limits(0, 0), "check")
    assert seen == [1]


@pytest.mark.parametrize("kind", [MemoryError, RecursionError, SystemError, KeyError])
def test_any_failure_inside_a_reading_is_one_coded_line_with_exit_2(
    kind: type[BaseException], capsys: pytest.CaptureFixture[str]
) -> None:
    def fails(args: argparse.Namespace) -> int:
        raise kind("inside")

    assert _command(argparse.Namespace(run=fails, command="check"), reading=True) == 2
    err = capsys.readouterr().err
    assert err.startswith("artune check: error E421: ") and err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize(
    ("flag", "value", "says"),
    [("--timeout", "-1", "is negative; give 0 for no limit"), ("--max-memory", "lots", "'lots' is not a number")],
)
def test_the_limit_flags_refuse_bad_values(
    flag: str, value: str, says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["check", "bundled:cpu", flag, value])
    assert stop.value.code == 2 and says in capsys.readouterr().err


def test_the_limit_flags_are_on_every_reading_command() -> None:
    from artune.cli import READINGS, build_parser

    commands = build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    for name in READINGS:
        options = {o for action in commands[name]._actions for o in action.option_strings}
        assert {"--timeout", "--max-memory"} <= options, name
