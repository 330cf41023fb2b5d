"""``artune review`` over the engines' own history: its moves are the evaluated decisions of both sides.

The releases are downloaded once and cached (skipped offline without them).
A change no release has is made on a copy of vLLM 0.34.0's own files, by
function name on their syntax tree (as ``tests/test_mutations_vllm.py``
does), so its answer is known by construction.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

from artune.errors import ReleaseUnavailable
from artune.formats.releases import fetch_release
from artune.review import Review, build_review, open_side

CUDA = "vllm/distributed/device_communicators/cuda_communicator.py"
KiB = 1 << 10


def _release(engine: str, version: str) -> Path:
    try:
        return fetch_release(engine, version)
    except ReleaseUnavailable as err:
        pytest.skip(f"{engine}=={version} is not cached and cannot be downloaded: {err}")


def _review(before: str, after: str) -> Review:
    try:
        return build_review(open_side("BEFORE", before), open_side("AFTER", after))
    except ReleaseUnavailable as err:
        pytest.skip(f"the released wheels cannot be had here: {err}")


def _early_return_below(release: Path, root: Path, nbytes: int) -> Path:
    """vLLM's tree with ``CudaCommunicator.all_reduce`` returning pynccl's all-reduce below ``nbytes`` first."""
    shutil.copytree(release / "vllm", root / "vllm")
    path = root / CUDA
    text = path.read_text()
    tree = ast.parse(text)
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "CudaCommunicator")
    method = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "all_reduce")
    first = method.body[0]
    indent = " " * first.col_offset
    lines = text.splitlines(keepends=True)
    lines[first.lineno - 1 : first.lineno - 1] = [
        f"{indent}if input_.numel() * input_.element_size() < {nbytes}:\n",
        f"{indent}    return self.pynccl_comm.all_reduce(input_)\n",
    ]
    path.write_text("".join(lines))
    return root


def test_an_early_return_to_nccl_below_64_kib_moves_every_path_below_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """#51's case: vLLM asks its process group first below 64 KiB, so every size below 64 KiB that ran another
    path before runs nccl now, on every arch and world size with a path there, and nothing else moves."""
    monkeypatch.setenv("ARTUNE_READINGS_DIR", str(tmp_path / "readings"))
    release = _release("vllm", "0.34.0")
    root = _early_return_below(release, tmp_path / "mutated", 64 * KiB)
    review = _review("vllm==0.34.0", f"vllm:{root}")
    assert review.moves, "the early return moves decisions"
    assert all((m.lo, m.hi, m.after) == (0, 64 * KiB - 1, ("nccl",)) for m in review.moves), review.moves
    assert all(m.before != ("nccl",) for m in review.moves)
    # the function that moved them, at its line
    assert {m.cause for m in review.moves} == {("`CudaCommunicator.all_reduce` changed (cuda_communicator.py:389)",)}
    one_host = {
        (arch, ws) for m in review.moves if m.on_one_host for arch in m.arch.split(", ") for ws in m.world_sizes
    }
    assert {("9.0", 8), ("10.0", 2), ("default", 2)} <= one_host
    assert review.exit_code == 1
    from artune.review import render_markdown

    section = render_markdown(review).split("<summary>What moves", 1)[1].split("</details>", 1)[0]
    assert "| [0, 64KiB) | `custom_ar` | `nccl` |" in section and "Moved by `CudaCommunicator.all_reduce`" in section


# ------------------------------------------------------------------ representative pairs of bench/review_history.py


def test_moves_between_hosts_are_asked_each_with_a_multi_node_launch() -> None:
    """vLLM 0.31.0 -> 0.32.0 moves only between hosts (9.0 in one NVLink domain): it was approved; now each
    move is asked, with vLLM's benchmark launched on every host of the topology it moves on (and with the
    switch set where it moves only under a switch's other value)."""
    from artune.review.asks import unasked

    review = _review("vllm==0.31.0", "vllm==0.32.0")
    default = [m for m in review.moves if not m.switch]
    assert default and not any(m.on_one_host for m in default)
    assert review.exit_code == 1 and review.verdict.value == "questions"
    assert unasked(review.moves, review.asks, "vllm") == ()
    topologies = {(hosts, nvlink) for m in default for hosts, nvlink in m.topologies}
    assert {(a.hosts, a.nvlink) for a in review.asks if not a.switch} == topologies
    for ask in review.asks:
        (command,) = ask.commands
        argv = command.argv[1:] if ask.switch else command.argv
        assert command.argv[0] == ask.switch or not ask.switch
        if ask.hosts > 1:
            per_host = ask.world_size // ask.hosts
            assert argv[:3] == ("torchrun", f"--nnodes={ask.hosts}", f"--nproc_per_node={per_host}")
            assert "--rdzv_endpoint=$MASTER_ADDR:29500" in command.text.split()  # the shell expands it on each host
        _runs_as_printed(command.text)
    first = review.ranked[0]
    assert first.code == "X111" and first.answer == next(a for a in review.asks if not a.switch).commands[0].text


def _runs_as_printed(line: str) -> None:
    """``line`` as each host's shell runs it: the variables it names expanded, a switch set before torchrun,
    torchrun's own parser taking the launch and vLLM's benchmark parser (its excerpt) taking the rest."""
    import argparse
    import os
    import shlex

    from torch.distributed.run import get_args_parser

    from artune.review.benchmarks import VLLM_BENCH
    from test_review import _excerpt, _flexible, _torch  # the vLLM parser's excerpt, as tests/test_review.py

    words = shlex.split(line.replace("$MASTER_ADDR", "10.0.0.1"))
    while "=" in words[0] and not words[0].startswith("-"):
        name, _, value = words.pop(0).partition("=")
        assert name.isupper() and value in ("0", "1")
    assert words[0] == "torchrun" and "$" not in line.replace("$MASTER_ADDR", "")
    launch = get_args_parser().parse_args(words[1:])
    assert launch.training_script == VLLM_BENCH
    assert int(launch.nproc_per_node) * int(launch.nnodes) >= 1
    bench = _excerpt("vllm_benchmark_device_communicators.txt", {"torch": _torch(), **_flexible(argparse)})
    args = bench["parser"].parse_args(launch.training_script_args)  # type: ignore[attr-defined]
    assert args.output_json.startswith("artune-evidence/") and os.path.basename(args.output_json).endswith(".json")


def test_findings_are_matched_by_code_place_and_data() -> None:
    """vLLM 0.24.0 -> 0.25.0: V111 names one more QuickReduce level (a word), N101 names the release: neither is
    new. Its one move is under ``VLLM_ALLREDUCE_USE_FLASHINFER=1`` (off by default), caused by the rows it adds."""
    review = _review("vllm==0.24.0", "vllm==0.25.0")
    assert review.questions == ()
    assert any(q.code == "V111" for q in review.inherited)
    assert not any(q.code == "N101" for q in review.notes)
    assert review.moves and all(m.switch == "VLLM_ALLREDUCE_USE_FLASHINFER=1" for m in review.moves)
    for m in review.moves:
        (arch,) = m.arch.split(", ")  # moves of different causes (each arch's own row) stay apart
        assert m.cause == (
            f"`FI_ALLREDUCE_FUSION_MAX_SIZE_MB['{arch}'][16]` none -> 64 MB (allreduce_rms_fusion.py:"
            f"{100 if arch == '10.0' else 106})",
        ), m.cause
    assert review.exit_code == 1 and all(a.switch for a in review.asks)


def test_a_pair_whose_decisions_are_identical_under_every_switch_is_approved() -> None:
    review = _review("vllm==0.12.0", "vllm==0.13.0")
    assert not review.changed and review.questions == ()
    assert review.exit_code == 0


def test_a_default_switch_is_named_as_the_cause() -> None:
    """vLLM 0.28.0 -> 0.29.0 turns ``VLLM_ALLREDUCE_USE_FLASHINFER`` on by default: the moves to flashinfer_ar
    are its; a question about them says so."""
    review = _review("vllm==0.28.0", "vllm==0.29.0")
    flashinfer = [m for m in review.moves if not m.switch and "flashinfer_ar" in m.after]
    assert flashinfer and all(m.cause == ("`VLLM_ALLREDUCE_USE_FLASHINFER`'s default, 0 -> 1",) for m in flashinfer)
    asked = [q for q in review.ranked if q.code == "X111" and "only with" not in q.message]
    assert asked and "`VLLM_ALLREDUCE_USE_FLASHINFER`'s default, 0 -> 1" in asked[0].message


def test_the_seed_pull_request_asks_only_about_what_it_changes() -> None:
    """SGLang 0.5.18 -> 0.5.19 (Rubin's rows): world sizes 9-15 ran nccl before and after, so "no config" there
    is no question for this change; and both wheels give 1shot_push num_push_blocks=num_sm, so no block count
    of it changes, on 10.7 (which 0.5.18 ran by 10.0's thresholds with its own SM count) or anywhere."""
    review = _review("sglang==0.5.18", "sglang==0.5.19")
    moved = {(arch, ws) for m in review.moves for arch in m.arch.split(", ") for ws in m.world_sizes}
    assert not any(9 <= ws <= 15 for _, ws in moved)
    assert not [q for q in review.ranked if q.code == "E201"]
    assert [q for q in review.unmoved if q.code == "E201" and "9-15" in q.message]
    assert not [p for p in review.params if p.algorithm == "1shot_push" and p.param == "blocks"], review.params
    assert {(p.before, p.after) for p in review.params if p.algorithm == "2shot_pull"} == {("96", "min(192,sms)")}


def test_an_answer_answers_on_the_platforms_own_arch() -> None:
    """A finding with no world size is answered by what AFTER runs on its arch, not by printing it again; a
    ROCm finding's answer names the gfx arch, never a CUDA one; a finding that names world sizes (its field, not
    its text) is explained at one of them."""
    from artune.review.questions import AnswerContext, ranked
    from artune.review.types import Question

    ctx = AnswerContext("vllm==0.27.0", "vllm", (), (), {"9.0": (2, 4, 8), "10.0": (2, 4)})
    rocm = Question("warning", "vllm/q.py:55", "gfx94*, gfx95*", "ws 8", "QuickReduce never runs", "V111", (8,))
    sizes = tuple(range(9, 17))
    raises = Question("error", "x.py:1", "9.0", "", "raises KeyError at world sizes 9-16", "E202", named=sizes)
    clipped = Question("warning", "x.py:2", "*", "", "rows above 8MiB capped", "E301")
    answers = {q.code: q.answer for q in ranked([rocm, raises, clipped], [], [], ctx)}
    assert answers["V111"] == "artune explain --table vllm==0.27.0 --arch gfx942 --world-size 8 --size 1MiB"
    assert answers["E202"] == "artune explain --table vllm==0.27.0 --arch 9.0 --world-size 9 --size 1MiB"
    assert answers["E301"] == "artune show vllm==0.27.0@9.0"
    from artune.cli import build_parser

    for answer in answers.values():
        build_parser().parse_args(answer.split()[1:])


def test_diffs_first_line_speaks_for_every_arch_and_names_arches_that_arrive(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """vLLM 0.10.2 adds tables for 9.0 and 10.0: the first line says so, and what differs or not on each arch."""
    from artune.cli import main

    _release("vllm", "0.10.1.1")
    _release("vllm", "0.10.2")
    assert main(["diff", "vllm==0.10.1.1", "vllm==0.10.2"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first == (
        "vllm==0.10.1.1 -> vllm==0.10.2: identical on every arch compared; arch 9.0 arrives in B; "
        "arch 10.0 arrives in B"
    )
    assert main(["diff", "vllm==0.28.0", "vllm==0.29.0"]) == 1
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("vllm==0.28.0 -> vllm==0.29.0: ") and "range(s) differ on arch 9.0 (" in first
    assert "10.7 (" in first and "default (" in first


def _on_a_terminal(argv: list[str], columns: int, lines: int) -> str:
    """What ``artune ARGV`` shows on a terminal ``columns`` wide (a pseudo-terminal), its colours stripped."""
    import os
    import pty
    import re
    import select
    import subprocess
    import sys

    main, child = pty.openpty()
    env = {**os.environ, "COLUMNS": str(columns), "LINES": str(lines)}
    # the page is stdout's: stderr off the terminal, where the spinner shown while a release is read would
    # interleave its frames with the page in what the pseudo-terminal hands back (a terminal erases them)
    done = subprocess.Popen([sys.executable, "-m", "artune", *argv], stdout=child, stderr=subprocess.DEVNULL, env=env)
    os.close(child)
    chunks = []
    try:
        while True:
            ready, _, _ = select.select([main], [], [], 300)
            if not ready:
                done.kill()
                raise AssertionError("artune review printed nothing for 300 s")
            try:
                chunk = os.read(main, 65536)
            except OSError:  # the child closed its end
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(main)
        done.wait(timeout=60)
    text = b"".join(chunks).decode("utf-8", "replace").replace("\r\n", "\n")
    return re.sub(r"\x1b\[[0-9;]*[A-Za-z]|\x1b\]8;[^\x1b]*\x1b\\\\", "", text)


def test_the_review_on_a_terminal_opens_with_the_verdict_and_the_questions_in_vllms_words() -> None:
    """#53: on a terminal no HTML, no line past its edge; the first screen holds the verdict and the questions,
    naming vLLM's algorithms and commands; artune's own algorithm names are nowhere in a vLLM review's
    questions or in what it asks to measure."""
    _release("vllm", "0.26.0")
    _release("vllm", "0.27.0")
    shown = _on_a_terminal(["review", "vllm==0.26.0", "vllm==0.27.0"], 100, 50)
    lines = shown.splitlines()
    assert not [line for line in lines if "<details" in line or "<summary" in line or "</" in line]
    assert max(len(line) for line in lines) <= 100
    assert lines[2].startswith("Verdict: questions.")
    screen = "\n".join(lines[:50])
    assert "What decides it" in screen and " 1 warning E101" in screen and " 2 warning X111" in screen
    assert "benchmark_device_communicators.py" in screen
    for artune_name in ("1shot_push", "2shot_pull", "1shot_pull"):
        assert artune_name not in screen and f"measure on Rubin {artune_name}" not in shown


def test_prose_keeps_a_subscript_whole_inside_parentheses() -> None:
    """#53: the Markdown broke at ``(KeyError in `graph_map[world_size`])``."""
    from artune.review.markdown import inline

    text = "__init__ raises (KeyError in graph_map[world_size]) at world sizes 9-16"
    assert inline(text) == "`__init__` raises (KeyError in `graph_map[world_size]`) at world sizes 9-16"


@pytest.mark.parametrize(("before", "after"), [("vllm==0.26.0", "vllm==0.27.0"), ("sglang==0.5.18", "sglang==0.5.19")])
def test_each_question_about_a_move_names_its_cause(before: str, after: str) -> None:
    """#55: a question about moved ranges (unmeasured, or a predicted loss) says what moved them; a finding's
    question points at its file and line. SGLang 0.5.19's 10.7 moves are its new ``_sm107_configs``."""
    review = _review(before, after)
    assert review.ranked
    for q in review.ranked:
        if q.code.startswith("X"):
            assert "; moved by " in q.message, q.message
        else:
            assert q.where, q
    assert all(m.cause for m in review.moves)
    if before.startswith("sglang"):
        assert all(m.cause[0].startswith("`_sm107_configs` new") for m in review.moves), review.moves[0].cause
