"""``artune review``: what moves, the questions, the evidence and the verdict, on self-written engine files.

The vLLM-shaped files here are written for these tests (made-up figures in
the shape of vLLM's ``all_reduce_utils.py`` and ``symm_mem.py``); no engine
file is copied. The hook test builds a git repository with an ``origin`` of
its own and runs the exact command that ``.pre-commit-hooks.yaml`` declares.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from artune.cli import main
from artune.errors import ReleaseUnavailable
from artune.formats.gitrev import engine_members, revision_tree
from artune.measure.records import SCHEMA, Candidate, Header, Measurement, MeasurementLog
from artune.review import Review, Verdict, build_review, open_side, render_json, render_markdown
from artune.review.benchmarks import (
    SGLANG_BENCH,
    SGLANG_SIZES,
    TRTLLM_BENCH,
    VLLM_BENCH,
    probes,
    reach,
    sglang_command,
    trtllm_commands,
    vllm_command,
)
from artune.review.markdown import SCREEN, outside_details
from artune.review.types import BenchCommand, Question
from artune.table.io import dump_table
from artune.table.types import Band, Plan, Platform, Provenance, Table, freeze_params

ROOT = Path(__file__).parents[1]
MiB = 1 << 20
UTILS = "vllm/distributed/device_communicators/all_reduce_utils.py"
SYMM = "vllm/distributed/device_communicators/symm_mem.py"

# ------------------------------------------------------------------ self-written vLLM-shaped files

_SIZES = {  # custom all-reduce and symmetric-memory bounds (MiB) per arch and world size: made up
    "9.0": ({2: 4, 4: 2, 6: 1, 8: 1}, {2: 16, 4: 16, 6: 32, 8: 32}, [4, 6, 8]),
    "10.3": ({2: 2, 4: 2, 6: 1, 8: 1}, {2: 8, 4: 16, 6: 32, 8: 64}, [6, 8]),
}


def _utils(arches: dict[str, tuple[dict[int, int], dict[int, int], list[int]]]) -> str:
    def table(k: int) -> str:
        rows = "".join(
            f'    "{arch}": {{{", ".join(f"{ws}: {mib} * MiB" for ws, mib in t[k].items())}}},\n'
            for arch, t in arches.items()
        )
        return "{\n" + rows + "}"

    return (
        "# artune test fixture in the shape of vLLM's all_reduce_utils.py; figures made up. Not vLLM's file.\n"
        "MiB = 1024 * 1024\n\n"
        f"CUSTOM_ALL_REDUCE_MAX_SIZES = {table(0)}\n\n"
        f"SYMM_MEM_ALL_REDUCE_MAX_SIZES = {table(1)}\n"
    )


def _symm(arches: dict[str, tuple[dict[int, int], dict[int, int], list[int]]]) -> str:
    rows = "".join(f'        "{arch}": {t[2]},\n' for arch, t in arches.items())
    return (
        "# artune test fixture in the shape of vLLM's symm_mem.py. Not vLLM's file.\n"
        "class SymmMemCommunicator:\n"
        "    _WORLD_SIZES_MULTIMEM = {\n" + rows + "    }\n\n"
        "    def should_use_symm_mem(self, inp):\n"
        "        inp_size = inp.numel() * inp.element_size()\n"
        "        if inp_size % 4 != 0:\n"
        "            return False\n"
        "        return inp_size <= self.max_size\n"
    )


def write_vllm(root: Path, arches: dict[str, tuple[dict[int, int], dict[int, int], list[int]]]) -> Path:
    for rel, text in ((UTILS, _utils(arches)), (SYMM, _symm(arches))):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def rubin_change() -> dict[str, tuple[dict[int, int], dict[int, int], list[int]]]:
    """The change under review: 10.7 arrives as a copy of 10.3, and 9.0's ws 8 symmetric-memory bound doubles."""
    after = {arch: (dict(a), dict(b), list(c)) for arch, (a, b, c) in _SIZES.items()}
    after["9.0"][1][8] = 64
    after["10.7"] = after["10.3"]
    return after


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t"}
    env["GIT_COMMITTER_EMAIL"] = "t@t"
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def vllm_checkout(tmp_path: Path) -> Path:
    """A vLLM-shaped checkout whose main holds ``_SIZES``, pushed to an ``origin`` of its own."""
    origin, repo = tmp_path / "origin.git", tmp_path / "engine"
    repo.mkdir()
    _git(tmp_path, "init", "-q", "--bare", "-b", "main", str(origin))
    _git(repo, "init", "-q", "-b", "main")
    write_vllm(repo, _SIZES)
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "tables")
    _git(repo, "remote", "add", "origin", str(origin))
    _git(repo, "push", "-q", "origin", "main")
    return repo


def two_commits(tmp_path: Path) -> Path:
    """A vLLM-shaped checkout: main (pushed to its own ``origin``) and a branch with the Rubin change."""
    repo = vllm_checkout(tmp_path)
    _git(repo, "checkout", "-qb", "rubin")
    write_vllm(repo, rubin_change())
    _git(repo, "commit", "-qam", "rubin rows")
    return repo


def hook(hook_id: str) -> dict[str, object]:
    """One hook of .pre-commit-hooks.yaml: its entry, args and files pattern."""
    import yaml

    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    return next(h for h in hooks if h["id"] == hook_id)


def cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``artune ARGS`` as its own process in ``cwd``, as a hook or CI step runs it."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run(
        [sys.executable, "-m", "artune", *args], cwd=cwd, capture_output=True, text=True, env=env, timeout=120
    )


# ------------------------------------------------------------------ the hook and the CI step


def test_hook_command_on_a_two_commit_repository(tmp_path: Path) -> None:
    repo = two_commits(tmp_path)
    spec = hook("artune-review-vllm")
    entry = str(spec["entry"]).split()
    assert entry[0] == "artune" and spec["pass_filenames"] is False
    args = [str(a) for a in spec["args"]]  # type: ignore[union-attr]
    assert args == ["vllm:.", "--base", "origin/main", "--evidence-dir", "artune-evidence"]
    before_status = _git(repo, "status", "--porcelain")
    done = cli([*entry[1:], *args], repo)
    assert done.returncode == 1, done.stderr  # questions: 10.7 copies 10.3
    page = done.stdout
    assert "10.7 = 10.3" in page
    assert re.search(r"\| 9\.0 \| 8 \| 1 host[^|]* \| \(32MiB, 64MiB\] \| `nccl` \| `symm_mem_multimem`", page)
    assert "New arch `10.7`" in page and "Every range moves in both modes" in page  # vLLM: no mode split
    assert f"origin/main:{UTILS}" in page or f"origin/main:{SYMM}" in page  # the base side names git's path
    # nothing was checked out: the branch, the index and the work tree are as they were
    assert _git(repo, "rev-parse", "--abbrev-ref", "HEAD").strip() == "rubin"
    assert _git(repo, "status", "--porcelain") == before_status
    # the documented GitHub Actions step: the same command, writing the comment's body to a file
    out = tmp_path / "review.md"
    again = cli([*entry[1:], *args, "--out", str(out)], repo)
    assert again.returncode == 1 and out.read_text() == again.stdout == page


def test_hook_runs_on_the_files_the_reader_reads() -> None:
    for engine in ("vllm", "sglang"):
        pattern = re.compile(str(hook(f"artune-review-{engine}")["files"]))
        for member in engine_members(engine):
            path = member + "x.py" if member.endswith("/") else member
            assert pattern.search(path), (engine, member)
        assert not pattern.search("README.md")
        assert pattern.search("artune-evidence/10.3-ws6-vllm.json")  # committing evidence reruns the review
    assert "python/sglang/srt/distributed/device_communicators/custom_all_reduce_v2.py" in engine_members("sglang")


def test_base_of_a_single_file_and_a_work_tree_change(tmp_path: Path) -> None:
    repo = two_commits(tmp_path)
    (repo / UTILS).write_text((repo / UTILS).read_text().replace('"9.0": {2: 16 * MiB', '"9.0": {2: 32 * MiB'))
    done = cli(["review", f"vllm:{UTILS}", "--base", "HEAD"], repo)  # only the uncommitted edit
    assert done.returncode == 1, done.stderr  # the move is a question: nothing measured it
    assert "| **X111** | 9.0 | 2 | graph (16MiB, 32MiB] |" in done.stdout
    assert re.search(r"\| 9\.0 \| 2 \| [^|]*\| \(16MiB, 32MiB\] \| `nccl` \|", done.stdout), done.stdout
    assert "New arch" not in done.stdout
    with revision_tree(str(repo), "HEAD~1", engine_members("vllm")) as tree:
        assert (tree.path / UTILS).read_text() == _utils(_SIZES)
        assert tree.rename(f"{tree.path / UTILS}:3") == f"HEAD~1:{UTILS}:3"
    assert not tree.root.exists()


WORKFLOW = ROOT / "docs" / "ci" / "artune-review.yml"


def workflow_commands(base_ref: str = "main") -> list[tuple[str, list[str]]]:
    """Each artune command the documented workflow runs, as ``(step name, argv)``: ``${{ github.* }}`` and the
    job's ``$VARIABLES`` filled in as Actions would for a pull request into ``base_ref``; argv stops where the
    shell takes over (``||``, ``>``)."""
    import shlex

    import yaml

    job = yaml.safe_load(WORKFLOW.read_text())["jobs"]["review"]
    github = {"base_ref": base_ref, "repository": "owner/engine", "event.pull_request.number": "7", "token": "t"}

    def filled(text: str) -> str:
        return re.sub(r"\$\{\{\s*github\.([\w.]+)\s*\}\}", lambda m: github[m[1]], text)

    env = {name: filled(value) for name, value in job.get("env", {}).items()}
    out = []
    for step in job["steps"]:
        for line in step.get("run", "").splitlines():
            words = shlex.split(filled(line), comments=True)
            if words[:1] == ["artune"]:
                stop = next((i for i, w in enumerate(words) if w in ("||", "|", "&&", ">", ";")), len(words))
                argv = [re.sub(r"\$(\w+)", lambda m: env[m[1]], w) for w in words[1:stop]]
                out.append((step.get("name", ""), argv))
    return out


def test_the_documented_workflow_runs_real_commands(tmp_path: Path) -> None:
    """docs/ci/artune-review.yml, as docs/review.md shows it: every artune command it runs parses, and run on a
    two-commit checkout they annotate the diff, write the SARIF it uploads and the comment it posts once."""
    import yaml
    from jsonschema import Draft4Validator

    from artune.cli import build_parser

    found = workflow_commands()
    assert {tuple(argv[:1]) for _, argv in found} == {("review",), ("check",)}
    for _, argv in found:
        build_parser().parse_args(argv)  # SystemExit on a flag that does not parse
    repo = two_commits(tmp_path)
    runs = {name: cli(argv, repo) for name, argv in found}
    annotated = runs["Findings on the diff"]
    assert annotated.returncode == 1, annotated.stderr  # questions: the step's `|| [ $? -eq 1 ]` passes it
    assert f"::warning file={UTILS},line=" in annotated.stdout and ",title=E101::arch 10.7" in annotated.stdout
    scanned = runs["Findings for code scanning"]
    schema = json.loads((ROOT / "tests" / "fixtures" / "sarif" / "sarif-schema-2.1.0.json").read_text())
    Draft4Validator(schema).validate(json.loads(scanned.stdout))
    job = yaml.safe_load(WORKFLOW.read_text())["jobs"]["review"]
    upload = next(s for s in job["steps"] if str(s.get("uses", "")).startswith("github/codeql-action/upload-sarif"))
    writes = next(s["run"] for s in job["steps"] if s.get("name") == "Findings for code scanning")
    assert f"> {upload['with']['sarif_file']}" in writes
    comment = next(s["run"] for s in job["steps"] if s.get("name", "").startswith("The review"))
    marker = re.search(r"marker='(<!-- [\w-]+ -->)'", comment)
    assert marker is not None and 'startswith(\\"$marker\\")' in comment and "--method PATCH" in comment
    assert runs[next(n for n in runs if n.startswith("The review"))].returncode == 1
    assert (repo / "review.md").read_text().startswith("# artune review")
    page = ROOT / "docs" / "review.md"
    assert '--8<-- "docs/ci/artune-review.yml"' in page.read_text()  # the page shows this very file


# ------------------------------------------------------------------ exit codes


def test_identical_sides_exit_0_with_no_change(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = write_vllm(tmp_path / "a", _SIZES), write_vllm(tmp_path / "b", _SIZES)
    assert main(["review", f"vllm:{a}", f"vllm:{b}"]) == 0
    page = capsys.readouterr().out
    assert page.splitlines()[2].startswith("**Verdict: approve.**") and "no change" in page
    assert "already in BEFORE, not introduced here" in page  # the findings both sides share are listed apart
    assert main(["review", "reference:vllm", "reference:vllm"]) == 0
    assert "no change" in capsys.readouterr().out


def test_unreadable_side_exit_2_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = write_vllm(tmp_path / "a", _SIZES)
    assert main(["review", f"vllm:{tmp_path / 'missing'}", f"vllm:{a}"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "BEFORE side" in err and "Traceback" not in err
    assert main(["review", f"vllm:{a}", "--base", "HEAD"]) == 2
    assert "not in a git work tree" in capsys.readouterr().err
    repo = two_commits(tmp_path)
    done = cli(["review", "vllm:.", "--base", "no-such-branch"], repo)
    assert done.returncode == 2 and "not a commit" in done.stderr and "Traceback" not in done.stderr
    assert main(["review", f"vllm:{a}"]) == 2  # one side without --base
    assert "BEFORE and AFTER" in capsys.readouterr().err


# ------------------------------------------------------------------ content and rendering


def test_json_is_the_markdown_content(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = write_vllm(tmp_path / "a", _SIZES), write_vllm(tmp_path / "b", rubin_change())
    assert main(["review", f"vllm:{a}", f"vllm:{b}"]) == 1
    page = capsys.readouterr().out
    assert main(["review", f"vllm:{a}", f"vllm:{b}", "--format", "json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert render_markdown(Review.from_dict(data)) == page
    assert data["exit_code"] == 1 and data["questions"]
    review = build_review(open_side("BEFORE", f"vllm:{a}"), open_side("AFTER", f"vllm:{b}"))
    assert Review.from_dict(json.loads(render_json(review))) == review


def test_questions_new_and_not_introduced(tmp_path: Path) -> None:
    a, b = write_vllm(tmp_path / "a", _SIZES), write_vllm(tmp_path / "b", rubin_change())
    review = build_review(open_side("BEFORE", f"vllm:{a}"), open_side("AFTER", f"vllm:{b}"))
    new = [(q.arch, q.message) for q in review.questions]
    assert any("10.7 = 10.3" in m for _, m in new)
    assert all(q.where for q in review.questions)
    assert any(re.search(r"all_reduce_utils\.py:\d+$", q.where) for q in review.questions)  # file:line
    old = [(q.arch, q.message) for q in review.inherited]
    assert any("3, 5, 7" in m for _, m in old)  # world sizes in no table: there before the change
    assert not set(new) & set(old)
    assert review.exit_code == 1
    assert any(c.startswith("10.7 = 10.3 in") for c in review.copies)  # the copied arch, from the plans


def test_page_renders_as_short_lines_and_whole_tables(tmp_path: Path) -> None:
    a, b = write_vllm(tmp_path / "a", _SIZES), write_vllm(tmp_path / "b", rubin_change())
    page = render_markdown(build_review(open_side("BEFORE", f"vllm:{a}"), open_side("AFTER", f"vllm:{b}")))
    lines = page.splitlines()
    assert lines[2].startswith("**Verdict: questions.**")  # the verdict first: one sentence in one paragraph
    verdict = page.split("\n\n")[1].replace("**", "").replace("\n", " ")
    assert verdict.count(". ") == 1 and verdict.endswith(".")  # "Verdict: questions. " and one sentence
    assert page.index("## What decides it") < page.index("<details") < page.index("<summary>What moves")
    assert len(outside_details(page)) <= SCREEN
    long = [line for line in lines if len(line) > 120 and str(tmp_path) not in line]
    assert not long
    tables = [[line for line in block.splitlines()] for block in page.split("\n\n") if block.startswith("| ")]
    assert tables
    for table in tables:
        cells = {len(re.split(r"(?<!\\)\|", row)) for row in table}
        assert len(cells) == 1, table  # every row as wide as the header: the table renders
    # every <details> opens with its summary and a blank line (GitHub renders the Markdown inside only then)
    for i, line in enumerate(lines):
        if line.startswith("<details"):
            assert lines[i + 1].startswith("<summary>") and lines[i + 2] == ""


def _cuda_table(path: Path, bands: tuple[Band, ...], blocks: int | None, arch: str = "10.7") -> str:
    params = freeze_params({"2shot_pull_mc": {"blocks": blocks}} if blocks is not None else {})
    plans = tuple(Plan(8, mode, bands, "nccl", params) for mode in ("graph", "eager"))
    dump_table(Table(Platform("cuda", arch), Provenance("measured", device="test GPU"), plans), path)
    return str(path)


def test_artune_tables_params_and_modelled_regret(tmp_path: Path) -> None:
    bands = (Band(64 << 10, ("1shot_push",)), Band(64 * MiB, ("2shot_pull_mc",)))
    a = _cuda_table(tmp_path / "a.toml", bands, 64)
    b = _cuda_table(tmp_path / "b.toml", bands, None)  # num_mc_blocks = None: multicast cannot run
    review = build_review(open_side("BEFORE", a), open_side("AFTER", b))
    (change,) = [p for p in review.params if p.algorithm == "2shot_pull_mc"]
    assert (change.param, change.before, change.after, change.world_sizes) == ("blocks", "64", None, (8,))
    (move,) = review.moves
    assert (move.lo, move.hi, move.before[0], move.after) == ((64 << 10) + 1, 64 * MiB, "2shot_pull_mc", ("nccl",))
    modelled = [r for r in review.regret if r.basis == "modelled"]
    assert {(r.world_size, r.mode) for r in modelled} == {(8, "graph"), (8, "eager")}
    assert all(r.source == "preset rubin" and r.sizes > 10 for r in modelled)
    page = render_markdown(review)
    assert "modelled: rubin" in page and "| none |" in page


def test_measured_regret_from_a_log(tmp_path: Path) -> None:
    bands_a = (Band(16 * MiB, ("2shot_pull_mc",)),)
    bands_b = (Band(64 * MiB, ("2shot_pull_mc",)),)
    a = _cuda_table(tmp_path / "a.toml", bands_a, 64, arch="10.3")
    b = _cuda_table(tmp_path / "b.toml", bands_b, 64, arch="10.3")
    platform = {"kind": "cuda", "arch": "10.3", "device": "test GPU"}
    header = Header(SCHEMA, platform, "test GPU", 8, gpu={"mode": "graph"})
    log = MeasurementLog(tmp_path / "measurements-ws8.jsonl", header)
    times = {32 * MiB: (200.0, 100.0), 48 * MiB: (300.0, 200.0)}  # (nccl, multicast) us
    for size, (nccl, mc) in times.items():
        for name, us in (("nccl", nccl), ("2shot_pull_mc", mc)):
            params = {"blocks": 64} if name != "nccl" else {}
            log.append(Measurement(Candidate.of(name, params), size, "bfloat16", 8, (us, us, us), 0))
    review = build_review(open_side("BEFORE", a), open_side("AFTER", b), [str(log.path)])
    (row,) = [r for r in review.regret if r.basis == "measured"]
    assert (row.world_size, row.mode, row.sizes, row.best) == (8, "graph", 2, "2shot_pull_mc")
    assert row.before == pytest.approx((2.0 * 1.5) ** 0.5) and row.after == 1.0 == row.after_high
    assert "measured" in render_markdown(review)


# ------------------------------------------------------------------ the released engines (item 2)


def _kept() -> tuple[tuple[str, str, str], ...]:
    """The reviews docs/reviews/ keeps: ``KEPT`` of bench/render_reviews.py, which writes them."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("render_reviews", ROOT / "bench" / "render_reviews.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.KEPT


KEPT = _kept()


@pytest.mark.parametrize(("before", "after", "page"), KEPT)
def test_the_kept_reviews_are_current(before: str, after: str, page: str) -> None:
    review = _release_review(before, after)
    kept = (ROOT / "docs" / "reviews" / page).read_text()
    assert render_markdown(review) == kept, (
        f"docs/reviews/{page} is not what artune review prints now; regenerate it: "
        "python bench/render_reviews.py --regenerate --no-screenshot"
    )


def moves_rows(page: str) -> list[dict[str, str]]:
    """The rows of the page's moves tables (one per cause), each as {column: cell}."""
    section = page.split("<summary>What moves", 1)[1].split("</details>", 1)[0]
    out = []
    tables = [b for b in section.split("\n\n") if b.startswith("| Arch | World sizes |")]
    for block in [b for b in tables if "| Sizes |" in b.splitlines()[0]]:  # one per cause; not the parameters
        cells = [[c.strip() for c in re.split(r"(?<!\\)\|", row)[1:-1]] for row in block.splitlines()]
        out += [dict(zip(cells[0], row, strict=True)) for row in cells[2:]]
    return out


@pytest.mark.parametrize(
    ("before", "after"),
    [("sglang==0.5.18", "sglang==0.5.19"), ("vllm==0.26.0", "vllm==0.27.0"), ("vllm==0.28.0", "vllm==0.33.0")],
)
def test_a_move_repeated_across_host_counts_is_one_row(before: str, after: str) -> None:
    rows = moves_rows(render_markdown(_release_review(before, after)))
    assert rows and all("Hosts" in row for row in rows)  # each of these moves across hosts too
    seen: dict[tuple, str] = {}
    for row in rows:
        rest = tuple((k, v) for k, v in row.items() if k != "Hosts")
        assert rest not in seen, f"two rows differ only in the host count: {seen[rest]!r} and {row['Hosts']!r}"
        seen[rest] = row["Hosts"]
    assert any(";" in row["Hosts"] or "," in row["Hosts"] for row in rows)  # several topologies in one row


def _answers_parse(review: Review) -> None:
    """Every answer is an artune command that artune's own parser takes, or a command the review prints
    under Measurements asked for (whose arguments the engines' own parsers take: tests above)."""
    import shlex

    from artune.cli import build_parser

    printed = {c.text for a in review.asks for c in a.commands}
    for q in review.ranked:
        if q.answer.startswith("artune "):
            build_parser().parse_args(shlex.split(q.answer)[1:])  # SystemExit on a flag that does not parse
        else:
            assert not q.answer or q.answer in printed, q.answer


@pytest.mark.parametrize(
    ("before", "after", "first", "where", "asks"),
    [
        ("vllm==0.26.0", "vllm==0.27.0", "E101", "all_reduce_utils.py:50", "10.7 = 10.3 in 3 of 3 tables"),
        # SGLang 0.5.18 -> 0.5.19 asked E201 first here, about world sizes whose path does not change (#55):
        # tests/test_review_history.py holds what its review asks now
    ],
)
def test_the_issue_reviews_open_with_the_verdict_and_fit_one_screen(
    before: str, after: str, first: str, where: str, asks: str
) -> None:
    """The two pull requests of issue #41: the verdict first, the question that would have stopped the merge
    first among the questions, with its file and line and the command that answers it; one screen."""
    review = _release_review(before, after)
    page = render_markdown(review)
    lines = page.splitlines()
    verdict = next(i for i, line in enumerate(lines) if line.startswith("**Verdict: "))
    assert verdict < 10
    assert len(outside_details(page)) <= SCREEN
    top = review.ranked[0]
    assert (top.code, top.where.endswith(where), asks in top.message) == (first, True, True)
    assert top.answer.startswith("artune tune --device cuda")
    assert f"1. **warning {first}**" in "\n".join(outside_details(page))
    _answers_parse(review)


def test_a_caveat_is_a_question_with_its_answer() -> None:
    """What an engine reading cannot vouch for (E401, E402) is asked about, ranked after what would stop a
    merge, and answered by running the engine's own code (``artune verify-engine``) where AFTER is an engine's
    source, else by ``artune explain`` at a world size it touches."""
    from artune.review.questions import AnswerContext, ranked

    caveat = Question("warning", "vllm/x.py:512", "10.0", "ws 4", "f: not evaluated", "E401", (4,))
    copied = Question("warning", "vllm/y.py:50", "10.7", "", "10.7 = 10.3 in 3 of 3 tables", "E101")
    clipped = Question("warning", "vllm/y.py:33", "*", "", "rows above 8MiB capped", "E301")
    ctx = AnswerContext("vllm==0.27.0", "vllm", (), (), {"10.0": (2, 4), "10.7": (2, 4, 8)})
    found = ranked([clipped, caveat, copied], [], [], ctx)
    assert [q.code for q in found] == ["E101", "E401", "E301"]
    assert found[1].answer == "artune verify-engine vllm==0.27.0"
    assert found[2].answer == "artune show vllm==0.27.0@10.0"  # what runs there: not the finding again
    assert "--world-size 8" in found[0].answer
    on_a_file = ranked([caveat], [], [], AnswerContext("table.toml", "", (), (), {"10.0": (2, 4)}))
    assert on_a_file[0].answer == "artune explain --table table.toml --arch 10.0 --world-size 4 --size 1MiB"
    one_arch = ranked([caveat], [], [], replace(ctx, after="vllm:./checkout@10.0"))
    assert one_arch[0].answer == "artune verify-engine vllm:./checkout"


def test_base_of_an_sglang_checkout_under_python(tmp_path: Path) -> None:
    import shutil

    repo = tmp_path / "sglang"
    shutil.copytree(ROOT / "tests" / "fixtures" / "engines" / "sglang-20", repo)  # artune's own fixture
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "configs")
    (configs,) = repo.glob("python/**/custom_all_reduce_v2.py")
    configs.write_text(configs.read_text().replace("{2: ModeConfig(4 * MB, INF)", "{2: ModeConfig(8 * MB, INF)"))
    done = cli(["review", "sglang:.", "--base", "HEAD"], repo)
    assert done.returncode in (0, 1), done.stderr
    assert re.search(r"\| 10\.\d \| 2 \| (?:[a-z, ]+ \| )?\(4MiB, 8MiB\] \|", done.stdout), done.stdout
    assert "HEAD:python/sglang/srt/distributed/device_communicators/custom_all_reduce_v2.py" in done.stdout


# ------------------------------------------------------------------ evidence questions (issue #32)

BENCH_FIXTURES = ROOT / "tests" / "fixtures" / "benchmarks"


def _excerpt(name: str, namespace: dict[str, Any]) -> dict[str, Any]:
    """Run an excerpt of an engine's benchmark (tests/fixtures/benchmarks, repository and commit named there)."""
    import textwrap

    for block in (BENCH_FIXTURES / name).read_text().split("\n\n"):
        code = [line for line in block.splitlines() if line.strip() and not line.lstrip().startswith("#")]
        if code:
            exec(textwrap.dedent("\n".join(code)), namespace)
    return namespace


def _torch() -> object:
    from types import SimpleNamespace

    dtype = SimpleNamespace(itemsize=2)
    return SimpleNamespace(bfloat16=dtype, float16=dtype, float32=SimpleNamespace(itemsize=4))


def vllm_parse(command: BenchCommand) -> list[int]:
    """The sizes (bytes) vLLM's benchmark measures for ``command``, parsed by its own argument parser."""
    import argparse

    ns = _excerpt("vllm_benchmark_device_communicators.txt", {"torch": _torch(), **_flexible(argparse)})
    assert command.argv[0] == "torchrun" and command.argv[2] == VLLM_BENCH
    args = ns["parser"].parse_args(list(command.argv[3:]))  # type: ignore[attr-defined]
    assert args.output_json == command.output
    return [n * ns["HIDDEN_SIZE"] * ns["BENCHMARK_DTYPE"].itemsize for n in args.sequence_lengths]  # type: ignore[attr-defined,operator]


def _flexible(argparse: object) -> dict[str, object]:
    return {"FlexibleArgumentParser": argparse.ArgumentParser}  # type: ignore[attr-defined]  # vLLM's subclass


def test_printed_commands_parse_with_the_benchmarks_own_parsers(monkeypatch: pytest.MonkeyPatch) -> None:
    import argparse

    ranges = [((640 << 10) + 1, 2304 << 10), ((2304 << 10) + 1, 8 * MiB), (0, 256 << 10), (32 * MiB + 1, None)]
    vllm = vllm_command(8, ranges, "out/10.0-ws8-vllm.json")
    sizes = vllm_parse(vllm)
    assert sizes == list(vllm.sizes) and not reach(sizes, ranges) and not vllm.missing
    assert 2304 << 10 in sizes and (2304 + 16) << 10 in sizes  # both sides of 2.25MiB
    # TensorRT-LLM: --range in elements; its own loop turns it into shapes
    ns = _excerpt(
        "trtllm_all_reduce.txt", {"ArgumentParser": argparse.ArgumentParser, "test_range": "2,3,2", "shape_list": []}
    )
    measured: list[int] = []
    for command in trtllm_commands(8, ("graph", "eager"), ranges, "out/10.0-ws8-trtllm.csv"):
        assert command.argv[:5] == ("mpirun", "-n", "8", "python", TRTLLM_BENCH)
        args = ns["parser"].parse_args(list(command.argv[5:]))  # type: ignore[attr-defined]
        assert args.enable_cudagraph == (command.modes == ("graph",)) and args.save_csv == command.output
        shapes: dict[str, Any] = {"test_range": args.range, "shape_list": []}
        _excerpt("trtllm_all_reduce.txt", {"ArgumentParser": argparse.ArgumentParser, **shapes})
        got = [t * h * 2 for t, h in shapes["shape_list"]]  # type: ignore[attr-defined]
        assert got == list(command.sizes)
        measured += got if command.modes == ("graph",) else []
    assert not reach(measured, ranges)
    # SGLang: no size argument; its own size list, and its parser reads the rest
    sglang = sglang_command(4, ranges[:2], "out/10.0-ws4-sglang.txt")
    ns = _excerpt("sglang_bench_custom_all_reduce.txt", {"torch": _torch(), "argparse": argparse, "__doc__": ""})
    assert tuple(ns["MESSAGE_SIZES_BYTES"]) == SGLANG_SIZES  # type: ignore[arg-type]
    assert sglang.argv[:3] == ("torchrun", "--nproc_per_node=4", SGLANG_BENCH) and sglang.stdout
    monkeypatch.setattr(sys, "argv", [SGLANG_BENCH, *sglang.argv[3:]])
    assert ns["parse_args"]().dtype == "bfloat16"  # type: ignore[operator]
    assert not sglang.missing  # its list reaches both sides of 640KiB, 2.25MiB and 8MiB
    assert sglang_command(4, [(48 * MiB, 64 * MiB)], "x").missing == (
        "no size in [48MiB, 64MiB]",
        "no size above 64MiB",
    )


def _release_review(before: str, after: str, *extra: str) -> Review:
    from artune.errors import ReleaseUnavailable

    try:
        return build_review(open_side("BEFORE", before), open_side("AFTER", after), *extra)  # type: ignore[arg-type]
    except ReleaseUnavailable as err:
        pytest.skip(f"the released wheels cannot be had here: {err}")


def test_sglang_release_asks_for_the_10_0_evidence() -> None:
    review = _release_review("sglang==0.5.20", "sglang==0.5.23")
    assert review.verdict is Verdict.QUESTIONS and review.exit_code == 1
    one_host = [a for a in review.asks if a.hosts == 1]
    assert [(a.code, a.arch, a.world_size) for a in one_host] == [("X111", "10.0", 4), ("X111", "10.0", 8)]
    (ws4, ws8) = one_host
    assert ("graph", (640 << 10) + 1, 2304 << 10) in ws4.ranges and ("eager", (3 * MiB) + 1, 8 * MiB) in ws4.ranges
    assert len(ws4.ranges) + len(ws8.ranges) == len([m for m in review.moves if m.on_one_host]) == 9
    for ask in one_host:
        engines = [c.engine for c in ask.commands]
        assert engines == ["sglang", "artune"] and not ask.commands[0].missing
    # the moves across a rack are asked about too, each with SGLang's benchmark launched on every host
    across = [a for a in review.asks if a.hosts > 1]
    assert {(a.world_size, a.hosts, a.nvlink) for a in across} == {
        (4, 2, "rack"),
        (4, 4, "rack"),
        (8, 2, "rack"),
        (8, 4, "rack"),
        (8, 8, "rack"),
    }
    for ask in across:
        (command,) = ask.commands
        assert command.argv[:3] == (
            "torchrun",
            f"--nnodes={ask.hosts}",
            f"--nproc_per_node={ask.world_size // ask.hosts}",
        )
        assert "--rdzv_endpoint=$MASTER_ADDR:29500" in command.text.split()
    assert {q.code for q in review.concerns} == {"X113"}  # the model's predicted losses, asked about
    page = render_markdown(review)
    assert "<summary>Measurements asked for: " in page and "--nproc_per_node=8" in page


def test_vllm_release_asks_for_10_7_with_vllms_benchmark() -> None:
    review = _release_review("vllm==0.25.0", "vllm==0.33.0")
    asked = {a.world_size: a for a in review.asks if a.arch == "10.7" and a.hosts == 1}
    assert sorted(asked) == [2, 4, 6, 8]
    for ws, ask in asked.items():
        (command,) = ask.commands
        assert command.argv[1] == f"--nproc_per_node={ws}"
        sizes = vllm_parse(command)
        assert not reach(sizes, [(lo, hi) for _, lo, hi in ask.ranges])
        assert {mode for mode, _, _ in ask.ranges} == {"graph"}  # vLLM's rows read no mode; its benchmark graphs
    assert review.exit_code == 1


def _log(path: Path, arch: str, ws: int, mode: str, times: dict[int, dict[str, float]]) -> str:
    platform = {"kind": "cuda", "arch": arch, "device": "test GPU"}
    log = MeasurementLog(path, Header(SCHEMA, platform, "test GPU", ws, gpu={"mode": mode}))
    for size, row in times.items():
        for name, us in row.items():
            params = {"blocks": 16} if name != "nccl" else {}
            samples = (us * 0.99, us, us * 1.01)
            log.append(Measurement(Candidate.of(name, params), size, "bfloat16", ws, samples, 0))
    return str(log.path)


def _sglang_logs(tmp_path: Path, review: Review, after_us: float) -> list[str]:
    """artune logs at every moved (ws, mode) of 10.0, at the probes that reach every bound: SGLang's algorithms
    at 10 us, AFTER's ``2shot_push`` at ``after_us``."""
    from artune.review.asks import moved_spans

    logs = []
    for (arch, ws, mode), spans in moved_spans(review.moves, "sglang").items():
        times = {
            n: {"1shot_push": 10.0, "2shot_pull": 10.0, "2shot_pull_mc": 10.0, "2shot_push": after_us, "nccl": 30.0}
            for n in probes(spans)
        }
        logs.append(_log(tmp_path / f"measurements-ws{ws}-{mode}.jsonl", arch, ws, mode, times))
    return logs


def test_sglang_verdict_follows_the_measurements_both_ways(tmp_path: Path) -> None:
    asked = _release_review("sglang==0.5.20", "sglang==0.5.23")
    wins = _sglang_logs(tmp_path / "wins", asked, after_us=8.0) if (tmp_path / "wins").mkdir() is None else []
    review = _release_review("sglang==0.5.20", "sglang==0.5.23", wins)
    # one host's moves are answered; the logs time no ranks across hosts, so those moves are still asked
    assert review.asks and all(a.hosts > 1 for a in review.asks) and not review.concerns, render_markdown(review)
    assert review.verdict is Verdict.QUESTIONS and review.exit_code == 1
    measured = [r for r in review.regret if r.basis == "measured"]
    assert len(measured) == 4 and all(r.after == 1.0 < r.before for r in measured)
    (tmp_path / "loses").mkdir()
    loses = _sglang_logs(tmp_path / "loses", asked, after_us=13.0)
    review = _release_review("sglang==0.5.20", "sglang==0.5.23", loses)
    assert review.verdict is Verdict.REQUEST_CHANGES and review.exit_code == 1
    losses = [q for q in review.concerns if q.code == "X201"]
    assert len(losses) == 4 and all("2shot_push" in q.message and "BEFORE's" in q.message for q in losses)
    assert render_markdown(review).splitlines()[2].startswith("**Verdict: request changes.**")


def test_a_sweep_short_of_a_bound_leaves_the_question(tmp_path: Path) -> None:
    asked = _release_review("sglang==0.5.20", "sglang==0.5.23")
    # ws 4 graph measured only inside the moves: nothing below 640KiB
    times = {n: {"1shot_push": 10.0, "2shot_pull": 10.0, "2shot_push": 8.0} for n in (768 << 10, 3 * MiB, 16 * MiB)}
    log = _log(tmp_path / "measurements-ws4-graph.jsonl", "10.0", 4, "graph", times)
    review = _release_review("sglang==0.5.20", "sglang==0.5.23", [log])
    ws4 = next(a for a in review.asks if a.world_size == 4)
    assert ws4.code == "X112" and "no size at or below 640KiB" in ws4.why
    assert review.verdict is Verdict.QUESTIONS and len(asked.asks) == len(review.asks)


def test_probes_reach_both_sides_of_every_bound() -> None:
    from hypothesis import given, settings
    from hypothesis import strategies as st

    bound = st.integers(0, 300 * MiB)

    @settings(max_examples=200, deadline=None)
    @given(st.lists(st.tuples(bound, st.one_of(st.none(), bound)), min_size=1, max_size=4))
    def check(raw: list[tuple[int, int | None]]) -> None:
        # each range holds a 16 KiB step, and starts at 0 or above the smallest size the benchmark has
        ranges = [(lo, hi) for lo, hi in raw if (hi is None or hi >= lo + 16 * 1024) and (lo == 0 or lo > 16 * 1024)]
        assert not reach(probes(ranges), ranges)

    check()


# ------------------------------------------------------------------ --evidence: engine benchmark outputs


def _vllm_json(path: Path, ws: int, seqs: list[int], ca_2stage_penalty: float) -> str:
    """A vLLM ``--output-json`` file written for the test (its shape as the benchmark's ``main`` writes it):
    times in ms that rise with size; ``ca_2stage`` pays ``ca_2stage_penalty`` ms per MiB above 1 MiB."""
    results = {}
    for seq in seqs:
        x = seq * 16384 / MiB
        timings = {
            "ca_1stage": 0.006 + 0.040 * x,
            "ca_2stage": 0.010 + 0.024 * x + ca_2stage_penalty * max(0.0, x - 1),
            "symm_mem_multimem": 0.030 + 0.019 * x,
            "symm_mem_two_shot": 0.035 + 0.025 * x,
            "pynccl": 0.110 + 0.0165 * x,
        }
        best = min(timings, key=timings.__getitem__)
        results[str(seq)] = {"timings": timings, "speedup_info": f"{best} ({timings['pynccl'] / timings[best]:.2f}x)"}
    data = {
        "world_size": ws,
        "dtype": "torch.bfloat16",
        "hidden_size": 8192,
        "sequence_lengths": seqs,
        "num_warmup": 5,
        "num_trials": 50,
        "cuda_graph_capture_cycles": 10,
        "results": results,
    }
    path.write_text(json.dumps(data, indent=2))
    return str(path)


def _ws6_change(tmp_path: Path) -> tuple[str, str]:
    """10.3's custom all-reduce cap at world size 6 rises from 1 MiB to 4 MiB: [1MiB, 4MiB) moves."""
    after = {arch: (dict(a), dict(b), list(c)) for arch, (a, b, c) in _SIZES.items()}
    after["10.3"][0][6] = 4
    return f"vllm:{write_vllm(tmp_path / 'a', _SIZES)}", f"vllm:{write_vllm(tmp_path / 'b', after)}"


def test_vllm_evidence_answers_the_move_both_ways(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before, after = _ws6_change(tmp_path)
    asked = build_review(open_side("BEFORE", before), open_side("AFTER", after))
    (ask,) = asked.asks
    (command,) = ask.commands
    seqs = [int(s) for s in command.argv[command.argv.index("--sequence-lengths") + 1 : -2]]
    seqs = sorted({*seqs, *(1 << k for k in range(12))})  # the printed lengths, and a sweep around them
    (tmp_path / "wins").mkdir()
    wins = _vllm_json(tmp_path / "wins" / "10.3-ws6-vllm.json", 6, seqs, 0.0)  # named as the command names it
    assert main(["review", before, after, "--evidence", wins, "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["verdict"] == "approve" and not data["asks"] and not data["concerns"]
    e = data["evidence"]
    assert e["sides"]["after"]["geomean"] < e["sides"]["before"]["geomean"]
    assert e["sides"]["after"]["worst"] >= e["sides"]["after"]["geomean"] >= 1.0
    assert e["best"]["geomean"] == pytest.approx(e["sides"]["after"]["geomean"], abs=0.01)  # AFTER is the best row
    assert "CUSTOM_ALL_REDUCE_MAX_SIZES" in e["best"]["row"]
    (sweep,) = e["sweeps"]
    assert (sweep["arch"], sweep["world_size"], sweep["mode"]) == ("10.3", 6, "graph")
    assert sweep["moved"]["after"]["geomean"] == pytest.approx(1.0)
    loses = _vllm_json(tmp_path / "loses.json", 6, seqs, 0.05)  # 2-stage custom all-reduce slow above 1 MiB
    assert main(["review", before, after, "--evidence", f"{loses}@10.3"]) == 1
    page = capsys.readouterr().out
    assert "**Verdict: request changes.**" in page and "**error X201** arch 10.3 ws 6 (graph)" in page
    assert "**error X202**" in page and "the better row:" in page  # the best row under vLLM's knobs, named
    assert "`symm_mem_multimem`" in page.split("X201", 1)[1]  # BEFORE's row, the better one
    assert "measured: loses.json" in page


def test_evidence_errors_name_the_file_and_the_fix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before, after = _ws6_change(tmp_path)
    seqs = [1 << k for k in range(10)]
    unnamed = _vllm_json(tmp_path / "sweep.json", 6, seqs, 0.0)
    # one arch moves at world size 6 in graph mode: the sweep is taken to be of it
    assert main(["review", before, after, "--evidence", unnamed]) in (0, 1)
    capsys.readouterr()
    assert main(["review", before, after, "--evidence", unnamed, "--arch", "7.5"]) == 2
    err = capsys.readouterr().err
    assert "neither side has a table for arch 7.5" in err and "Traceback" not in err
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert main(["review", before, after, "--evidence", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("artune") or "bad.json" in err
    assert err.count("\n") == 1 and "Traceback" not in err
    wrong = _vllm_json(tmp_path / "10.3-ws4-vllm.json", 6, seqs, 0.0)  # its name says ws 4, the file 6
    assert main(["review", before, after, "--evidence", wrong]) == 2
    assert "its name says 4" in capsys.readouterr().err


def test_evidence_dir_for_ci(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before, after = _ws6_change(tmp_path)
    folder = tmp_path / "artune-evidence"
    assert main(["review", before, after, "--evidence-dir", str(folder)]) == 1  # absent: the questions stand
    assert "| **X111** | 10.3 | 6 |" in capsys.readouterr().out
    folder.mkdir()
    _vllm_json(folder / "10.3-ws6-vllm.json", 6, [1 << k for k in range(12)] + [63, 65, 255, 257], 0.0)
    assert main(["review", before, after, "--evidence-dir", str(folder)]) == 0
    assert "**Verdict: approve.**" in capsys.readouterr().out


def test_sglang_benchmark_cannot_answer_sglangs_kernels(tmp_path: Path) -> None:
    jit = ROOT / "tests" / "fixtures" / "evidence" / "sglang" / "invented-jit-ws4.txt"
    named = tmp_path / "10.0-ws4-sglang.txt"
    named.write_text(jit.read_text())
    review = _release_review("sglang==0.5.20", "sglang==0.5.23", (), "", [str(named)])
    x104 = [q for q in review.concerns if q.code == "X114"]
    assert any("no column for sglang/2shot_push" in q.message for q in x104)  # AFTER's kernel
    assert any("no column for sglang/1shot_push" in q.message for q in x104)  # BEFORE's
    ws4 = next(a for a in review.asks if a.world_size == 4)
    assert ws4.code == "X112"  # the sweep is there; it timed SGLang's dispatch, not the rows' kernels
    assert review.verdict is Verdict.QUESTIONS and review.evidence is not None
    assert review.evidence.best.geomean is None and "covers vllm" in review.evidence.best.why


def test_hook_turns_questions_into_measured_lines(tmp_path: Path) -> None:
    """The CI workflow: the hook asks, the author commits the printed command's output, the hook approves."""
    repo = vllm_checkout(tmp_path)
    _git(repo, "checkout", "-qb", "ws6")
    after = {arch: (dict(a), dict(b), list(c)) for arch, (a, b, c) in _SIZES.items()}
    after["10.3"][0][6] = 4
    write_vllm(repo, after)
    _git(repo, "commit", "-qam", "10.3 ws 6: custom all-reduce up to 4 MiB")
    spec = hook("artune-review-vllm")
    command = [*str(spec["entry"]).split()[1:], *[str(a) for a in spec["args"]]]  # type: ignore[union-attr]
    asked = cli(command, repo)
    assert asked.returncode == 1 and "| **X111** | 10.3 | 6 |" in asked.stdout, asked.stderr
    printed = re.search(r"--output-json\s+([^\s`]+)", asked.stdout)
    assert printed is not None and printed[1] == "artune-evidence/10.3-ws6-vllm.json"
    (repo / "artune-evidence").mkdir()
    _vllm_json(repo / printed[1], 6, [1 << k for k in range(12)] + [63, 65, 255, 257], 0.0)  # the GPU run
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "evidence: 10.3 ws 6")
    answered = cli(command, repo)
    assert answered.returncode == 0, answered.stdout
    assert "measured: 10.3-ws6-vllm.json" in answered.stdout and "**Verdict: approve.**" in answered.stdout


def test_release_review_carries_the_evidence_fields(capsys: pytest.CaptureFixture[str]) -> None:
    """Issue #25's review: the 10.3 world-size-6 row as run, and the best row vLLM's knobs allow, in the JSON."""
    from artune.evidence import read_evidence
    from artune.evidence.score import score_table

    sweep = ROOT / "tests" / "fixtures" / "evidence" / "vllm" / "invented-sm103-ws6.json"
    try:
        after = open_side("AFTER", "vllm==0.33.0")
        open_side("BEFORE", "vllm==0.25.0")
    except ReleaseUnavailable as err:
        pytest.skip(f"the released wheels cannot be had here: {err}")
    args = ["review", "vllm==0.25.0", "vllm==0.33.0", "--evidence", str(sweep), "--arch", "10.3", "--format", "json"]
    assert main(args) == 1  # the other moves still have no evidence
    e = json.loads(capsys.readouterr().out)["evidence"]
    table = after.source.table_set.tables["10.3"]  # type: ignore[union-attr]
    independent = score_table(table, read_evidence(sweep), "10.3")
    assert e["sides"]["after"]["geomean"] == pytest.approx(independent.geomean, abs=0.01)
    assert e["sides"]["after"]["worst"] == pytest.approx(independent.worst.regret)  # type: ignore[union-attr]
    assert e["best"]["geomean"] * 1.1 <= e["sides"]["after"]["geomean"]
    assert "_WORLD_SIZES_MULTIMEM" in e["best"]["row"]
    assert e["sides"]["before"]["geomean"] is not None


def test_evidence_dir_reads_artune_logs_for_sglang(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """SGLang's benchmark cannot time its kernels; artune's tuner can, and CI finds its logs in the folder."""
    asked = _release_review("sglang==0.5.20", "sglang==0.5.23")
    folder = tmp_path / "artune-evidence" / "10.0-artune"  # as `artune tune --out` leaves them
    folder.mkdir(parents=True)
    _sglang_logs(folder, asked, after_us=8.0)
    argv = ["review", "sglang==0.5.20", "sglang==0.5.23", "--evidence-dir", str(tmp_path / "artune-evidence")]
    argv += ["--format", "json"]
    assert main(argv) == 1  # the moves across hosts, which no log of one host answers
    review = Review.from_dict(json.loads(capsys.readouterr().out))
    assert review.asks and all(a.hosts > 1 for a in review.asks)
    assert any(r.basis == "measured" and r.source.endswith("measurements-ws8-eager.jsonl") for r in review.regret)


def test_prose_names_code_whole_even_inside_parentheses() -> None:
    """A call's own parentheses stay in its code span; the prose's parentheses around it stay outside."""
    from artune.review.markdown import inline

    text = "its buffer (the 2GiB that ops.qr_max_size() returns) or (see f()) or (x_y)"
    assert inline(text) == "its buffer (the 2GiB that `ops.qr_max_size()` returns) or (see `f()`) or (`x_y`)"
