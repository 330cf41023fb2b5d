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
from pathlib import Path

import pytest

from artune.cli import main
from artune.formats.gitrev import engine_members, revision_tree
from artune.measure.records import SCHEMA, Candidate, Header, Measurement, MeasurementLog
from artune.review import Review, build_review, open_side, render_json, render_markdown
from artune.table.io import dump_table
from artune.table.model import Band, Plan, Platform, Provenance, Table, freeze_params

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


def two_commits(tmp_path: Path) -> Path:
    """A vLLM-shaped checkout: main (pushed to its own ``origin``) and a branch with the Rubin change."""
    origin, repo = tmp_path / "origin.git", tmp_path / "engine"
    repo.mkdir()
    _git(tmp_path, "init", "-q", "--bare", "-b", "main", str(origin))
    _git(repo, "init", "-q", "-b", "main")
    write_vllm(repo, _SIZES)
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "tables")
    _git(repo, "remote", "add", "origin", str(origin))
    _git(repo, "push", "-q", "origin", "main")
    _git(repo, "checkout", "-qb", "rubin")
    write_vllm(repo, rubin_change())
    _git(repo, "commit", "-qam", "rubin rows")
    return repo


def hook(hook_id: str) -> dict[str, object]:
    """One hook of .pre-commit-hooks.yaml: its entry, args (JSON list syntax there) and files pattern."""
    hooks: dict[str, dict[str, object]] = {}
    current: dict[str, object] = {}
    for line in (ROOT / ".pre-commit-hooks.yaml").read_text().splitlines():
        if line.startswith("- id:"):
            current = hooks.setdefault(line.split(":", 1)[1].strip(), {})
        elif line.startswith("  ") and ":" in line and current is not None:
            key, value = (part.strip() for part in line.split(":", 1))
            current[key] = json.loads(value) if key == "args" else value
    return hooks[hook_id]


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
    assert entry[0] == "artune" and spec["pass_filenames"] == "false"
    args = [str(a) for a in spec["args"]]  # type: ignore[union-attr]
    assert args == ["vllm:.", "--base", "origin/main"]
    before_status = _git(repo, "status", "--porcelain")
    done = cli([*entry[1:], *args], repo)
    assert done.returncode == 1, done.stderr  # questions: 10.7 copies 10.3
    page = done.stdout
    assert "10.7 = 10.3" in page
    assert re.search(r"\| 9\.0 \| 8 \| \(32MiB, 64MiB\] \| `nccl` \| `symm_mem_multimem`", page)
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
    assert "python/sglang/srt/distributed/device_communicators/custom_all_reduce_v2.py" in engine_members("sglang")


def test_base_of_a_single_file_and_a_work_tree_change(tmp_path: Path) -> None:
    repo = two_commits(tmp_path)
    (repo / UTILS).write_text((repo / UTILS).read_text().replace('"9.0": {2: 16 * MiB', '"9.0": {2: 32 * MiB'))
    done = cli(["review", f"vllm:{UTILS}", "--base", "HEAD"], repo)  # only the uncommitted edit
    assert done.returncode == 0, done.stderr
    assert re.search(r"\| 9\.0 \| 2 \| \(16MiB, 32MiB\] \| `nccl` \|", done.stdout)
    assert "New arch" not in done.stdout
    with revision_tree(str(repo), "HEAD~1", engine_members("vllm")) as tree:
        assert (tree.path / UTILS).read_text() == _utils(_SIZES)
        assert tree.rename(f"{tree.path / UTILS}:3") == f"HEAD~1:{UTILS}:3"
    assert not tree.root.exists()


# ------------------------------------------------------------------ exit codes


def test_identical_sides_exit_0_with_no_change(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = write_vllm(tmp_path / "a", _SIZES), write_vllm(tmp_path / "b", _SIZES)
    assert main(["review", f"vllm:{a}", f"vllm:{b}"]) == 0
    page = capsys.readouterr().out
    assert "no change" in page and "## Verdict" in page
    assert "### Not introduced here" in page  # the findings both sides share are listed apart
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
    order = [page.index(h) for h in ("## What moves", "## Questions", "## Evidence", "## Verdict")]
    assert order == sorted(order)
    lines = page.splitlines()
    long = [line for line in lines if len(line) > 120 and str(tmp_path) not in line]
    assert not long
    tables = [[line for line in block.splitlines()] for block in page.split("\n\n") if block.startswith("| ")]
    assert tables
    for table in tables:
        cells = {len(re.split(r"(?<!\\)\|", row)) for row in table}
        assert len(cells) == 1, table  # every row as wide as the header: the table renders
    verdict = page.split("## Verdict", 1)[1].strip()
    assert "\n\n" not in verdict and verdict.count(". ") == 0  # one sentence in one paragraph


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


@pytest.mark.parametrize(
    ("before", "after", "page"),
    [
        ("vllm==0.25.0", "vllm==0.33.0", "vllm-0.25.0-to-0.33.0.md"),
        ("sglang==0.5.20", "sglang==0.5.23", "sglang-0.5.20-to-0.5.23.md"),
    ],
)
def test_the_kept_reviews_are_current(before: str, after: str, page: str) -> None:
    from artune.formats.releases import ReleaseUnavailable

    try:
        review = build_review(open_side("BEFORE", before), open_side("AFTER", after))
    except ReleaseUnavailable as err:
        pytest.skip(f"the released wheels cannot be had here: {err}")
    kept = (ROOT / "docs" / "reviews" / page).read_text()
    assert render_markdown(review) == kept, (
        f"docs/reviews/{page} is not what artune review prints now; regenerate it: "
        f"artune review {before} {after} --out docs/reviews/{page}"
    )


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
