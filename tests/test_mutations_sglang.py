"""Code no release has: a cached SGLang release's files, mutated, read by artune and run by the oracle.

Each mutation changes one of the engine's own functions (an early return in a
predicate or in the dispatch, a reordered branch, a row computed by a helper,
a statement artune's evaluator does not model). On the mutated files artune's
decision must change exactly as the engine's own code (the oracle) changes,
or, where it cannot follow, every decision that differs must be marked by an
UNEVALUATED caveat naming the mutated function (what ``explain`` prints as
"unverified" and ``check`` as E401). The operators below (``at_start``,
``guard``, ``swap``, ``wrap_row``, ``append``) apply to any function of any
release; ``test_an_early_return_in_every_function_the_reading_relies_on``
applies one to each of them.
"""

from __future__ import annotations

import ast
import shutil
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from artune.errors import ReleaseUnavailable
from artune.formats.releases import fetch_release
from artune.formats.sglang.read import read_sglang
from artune.formats.sglang.release import RELIED_ON
from artune.oracles import Probe, decide_all
from artune.oracles import sglang as oracle
from artune.table.types import CaveatKind

DIR = "sglang/srt/distributed/device_communicators"
V2 = f"{DIR}/custom_all_reduce_v2.py"
DISPATCHER = f"{DIR}/custom_all_reduce.py"
CONFIGS = f"{DIR}/configs/custom_all_reduce_v2.py"
V1_OFF = {"SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2": "0"}  # where the legacy class runs on one host
WORLD_SIZES = (2, 3, 4, 6, 8, 12, 16)
RACKS = ((8, 2, "rack"), (8, 2, "host"), (16, 4, "rack"), (32, 4, "rack"))

Edit = Callable[[str], str]


# ------------------------------------------------------------------ operators: text edits that keep every other line


def _function(tree: ast.Module, qualified: str) -> ast.FunctionDef:
    owner, _, name = qualified.rpartition(".")
    body = tree.body
    if owner:
        (cls,) = [s for s in tree.body if isinstance(s, ast.ClassDef) and s.name == owner]
        body = cls.body
    (func,) = [s for s in body if isinstance(s, ast.FunctionDef) and s.name == name]
    return func


def _statements(func: ast.FunctionDef) -> list[ast.stmt]:
    """The body without its docstring."""
    body = func.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        return body[1:]
    return body


def _insert(text: str, line: int, indent: int, code: str) -> str:
    lines = text.splitlines(keepends=True)
    block = textwrap.indent(textwrap.dedent(code).strip("\n") + "\n", " " * indent)
    return "".join(lines[: line - 1]) + block + "".join(lines[line - 1 :])


def at_start(qualified: str, code: str) -> Edit:
    """``code`` as the first statement of the function (after its docstring)."""

    def edit(text: str) -> str:
        first = _statements(_function(ast.parse(text), qualified))[0]
        return _insert(text, first.lineno, first.col_offset, code)

    return edit


def guard(qualified: str, index: int, code: str) -> Edit:
    """``code`` before the function's ``index``-th statement (its docstring aside)."""

    def edit(text: str) -> str:
        stmt = _statements(_function(ast.parse(text), qualified))[index]
        return _insert(text, stmt.lineno, stmt.col_offset, code)

    return edit


def swap(qualified: str, first: int, second: int) -> Edit:
    """The function's ``first``-th and ``second``-th statements, exchanged (each with its whole text)."""

    def edit(text: str) -> str:
        body = _statements(_function(ast.parse(text), qualified))
        lines = text.splitlines(keepends=True)
        a, b = sorted((body[first], body[second]), key=lambda s: s.lineno)
        span = lambda s: (s.lineno - 1, s.end_lineno or s.lineno)  # noqa: E731
        (a0, a1), (b0, b1) = span(a), span(b)
        return "".join(lines[:a0] + lines[b0:b1] + lines[a1:b0] + lines[a0:a1] + lines[b1:])

    return edit


def replace_text(old: str, new: str) -> Edit:
    def edit(text: str) -> str:
        assert text.count(old) == 1, f"{old!r} is not in the file once"
        return text.replace(old, new)

    return edit


def wrap_row(qualified: str, key: int, helper: str) -> Edit:
    """The row ``key`` of the dict the function returns, passed through ``helper(...)`` (defined elsewhere)."""

    def edit(text: str) -> str:
        func = _function(ast.parse(text), qualified)
        (table,) = [r.value for r in ast.walk(func) if isinstance(r, ast.Return) and isinstance(r.value, ast.Dict)]
        (row,) = [
            v for k, v in zip(table.keys, table.values, strict=True) if isinstance(k, ast.Constant) and k.value == key
        ]
        lines = text.splitlines(keepends=True)
        end = row.end_lineno or row.lineno
        lines[end - 1] = lines[end - 1][: row.end_col_offset] + ")" + lines[end - 1][row.end_col_offset :]
        lines[row.lineno - 1] = (
            lines[row.lineno - 1][: row.col_offset] + f"{helper}(" + lines[row.lineno - 1][row.col_offset :]
        )
        return "".join(lines)

    return edit


def append(code: str) -> Edit:
    """Module-level ``code`` after everything else."""
    return lambda text: text + "\n\n" + textwrap.dedent(code).strip("\n") + "\n"


def then(*edits: Edit) -> Edit:
    def edit(text: str) -> str:
        for one in edits:
            text = one(text)
        return text

    return edit


@dataclass(frozen=True)
class Mutation:
    """One change to a release's file, the engine function it changes, and the settings it is read under."""

    name: str
    file: str
    edit: Edit
    function: str
    env: dict[str, str] = field(default_factory=dict)
    changes: bool = True  # whether the engine's own decisions change (else: the mutation must not mislead)


# ------------------------------------------------------------------ the harness


def release(version: str) -> Path:
    try:
        return fetch_release("sglang", version)
    except ReleaseUnavailable as err:
        pytest.skip(f"sglang=={version} is not cached and cannot be downloaded: {err}")


def mutated(root: Path, tmp_path: Path, mutation: Mutation) -> Path:
    copy = tmp_path / "release"
    shutil.copytree(root, copy)
    path = copy / mutation.file
    path.write_text(mutation.edit(path.read_text()))
    return copy


def probes(root: Path, env: dict[str, str]) -> list[Probe]:
    return oracle.probes(root, ["10.0"], WORLD_SIZES, RACKS, env)


def verdict(root: Path, mutation: Mutation, tmp_path: Path) -> tuple[int, int]:
    """``(probes whose engine decision the mutation changed, probes artune decides otherwise)``; asserts that
    every one artune decides otherwise is marked by an UNEVALUATED caveat naming the mutated function."""
    changed_root = mutated(root, tmp_path, mutation)
    ps = probes(changed_root, mutation.env)
    before = oracle.engine_decisions(root, ps, mutation.env)
    engine = oracle.engine_decisions(changed_root, ps, mutation.env)
    imported = read_sglang(str(changed_root), mutation.env)
    ours = decide_all(imported.tables, ps, imported.findings)
    differ = [(p, e, a) for p, e, a in zip(ps, engine, ours, strict=True) if e != a]
    for probe, theirs, mine in differ:
        caveats = imported.tables.resolve(probe.arch).caveats
        named = [
            c
            for c in caveats
            if c.kind is CaveatKind.UNEVALUATED and c.function == mutation.function and c.touches(probe.world_size)
        ]
        assert named, (
            f"{mutation.name}: {probe} runs {theirs} in the engine, {mine} in artune, and no caveat names "
            f"{mutation.function}: {[c.describe() for c in caveats if c.kind is CaveatKind.UNEVALUATED]}"
        )
    return sum(b != e for b, e in zip(before, engine, strict=True)), len(differ)


# ------------------------------------------------------------------ mutations artune must follow exactly

FOLLOWED = [
    Mutation(
        "v2 declines every group",
        V2,
        at_start("can_use_custom_all_reduce_v2", "return False"),
        "can_use_custom_all_reduce_v2",
    ),
    Mutation(
        "v2 declines 4 ranks",
        V2,
        at_start("can_use_custom_all_reduce_v2", "if dist.get_world_size(group=group) == 4:\n    return False"),
        "can_use_custom_all_reduce_v2",
    ),
    Mutation(
        "v2 admits no size under 64 KiB",
        V2,
        at_start(
            "CustomAllReduceV2.should_custom_ar", "if inp.numel() * inp.element_size() < 64 * 1024:\n    return False"
        ),
        "CustomAllReduceV2.should_custom_ar",
    ),
    Mutation(
        "the legacy class admits nothing above 1 MiB",
        DISPATCHER,
        at_start(
            "CustomAllreduce.should_custom_ar", "if inp.numel() * inp.element_size() > 1024 * 1024:\n    return False"
        ),
        "CustomAllreduce.should_custom_ar",
        V1_OFF,
    ),
    Mutation(
        "the legacy class takes 3 ranks",
        DISPATCHER,
        replace_text("_SUPPORTED_WORLD_SIZES = [2, 4, 6, 8]", "_SUPPORTED_WORLD_SIZES = [2, 3, 4, 6, 8]"),
        "CustomAllreduce.__init__",
        V1_OFF,
    ),
    Mutation(
        "the dispatch returns the legacy class early",
        DISPATCHER,
        at_start("dispatch_custom_allreduce", "return CustomAllreduce"),
        "dispatch_custom_allreduce",
    ),
    Mutation(
        "the dispatch builds nothing at 8 ranks",
        DISPATCHER,
        at_start("dispatch_custom_allreduce", "if dist.get_world_size(group=group) == 8:\n    return None"),
        "dispatch_custom_allreduce",
    ),
    Mutation(
        "the config pick tries one-shot pull before two-shot push",
        V2,
        swap("CustomAllReduceV2._pick_config", 2, 3),
        "CustomAllReduceV2._pick_config",
    ),
    Mutation(
        "the config pick tries multicast first",
        V2,
        swap("CustomAllReduceV2._pick_config", 2, 5),
        "CustomAllReduceV2._pick_config",
    ),
    Mutation(
        "a row computed by a helper",
        CONFIGS,
        then(
            wrap_row("_sm100_configs", 4, "_halved"),
            append(
                """
                def _halved(cfg: AllReduceConfig) -> AllReduceConfig:
                    eager = cfg.eager._replace(one_shot_push_threshold=cfg.eager.one_shot_push_threshold // 2)
                    return cfg._replace(eager=eager)
                """
            ),
        ),
        "_sm100_configs",
    ),
    Mutation(
        "the configs take 32 ranks",
        CONFIGS,
        then(
            replace_text(
                "    return _get_all_reduce_configs()[world_size]",
                "    configs = _get_all_reduce_configs()\n    return configs[16 if world_size == 32 else world_size]",
            ),
            replace_text(
                "    return tuple(_get_all_reduce_configs())",
                "    return (*_get_all_reduce_configs(), 32)",
            ),
        ),
        "get_all_reduce_config",
    ),
    Mutation(
        "a row changed by a module-level statement after the table",
        CONFIGS,
        append(
            """
            _tuned = _sm100_configs

            @cache
            def _sm100_configs(num_sm: int) -> dict[int, AllReduceConfig]:
                rows = dict(_tuned(num_sm))
                rows[6] = rows[8]
                return rows
            """
        ),
        "_sm100_configs",
    ),
    Mutation(
        "a statement without effect the evaluator does not model",
        V2,
        guard("CustomAllReduceV2._pick_config", 0, "with torch.no_grad():\n    pass"),
        "CustomAllReduceV2._pick_config",
        changes=False,
    ),
]


@pytest.mark.parametrize("mutation", FOLLOWED, ids=[m.name for m in FOLLOWED])
def test_artune_decides_as_the_mutated_release(mutation: Mutation, tmp_path: Path) -> None:
    root = release("0.5.23")
    changed, differ = verdict(root, mutation, tmp_path)
    assert (changed > 0) == mutation.changes, f"{mutation.name}: the engine's decisions changed at {changed} probes"
    assert differ == 0, f"{mutation.name}: artune differs from the mutated release at {differ} probes"


# ------------------------------------------------------------------ mutations artune cannot follow: it names them

NAMED = [
    Mutation(
        "a try the evaluator does not model decides",
        V2,
        at_start(
            "CustomAllReduceV2.should_custom_ar",
            "try:\n    import sglang_no_such_module\nexcept ImportError:\n    return False",
        ),
        "CustomAllReduceV2.should_custom_ar",
    ),
    Mutation(
        "a loop the evaluator does not model decides",
        V2,
        guard(
            "can_use_custom_all_reduce_v2",
            0,
            "n = dist.get_world_size(group=group)\nwhile n > 4:\n    return False",
        ),
        "can_use_custom_all_reduce_v2",
    ),
    Mutation(
        "a call to an unknown helper decides",
        DISPATCHER,
        then(
            replace_text("import torch\n", "import torch\nfrom sglang.srt.utils import is_blackwell_rack\n"),
            at_start("CustomAllreduce.should_custom_ar", "if not is_blackwell_rack():\n    return False"),
        ),
        "CustomAllreduce.should_custom_ar",
        V1_OFF,
    ),
]


@pytest.mark.parametrize("mutation", NAMED, ids=[m.name for m in NAMED])
def test_artune_names_the_function_it_cannot_follow(mutation: Mutation, tmp_path: Path) -> None:
    root = release("0.5.23")
    changed, _differ = verdict(root, mutation, tmp_path)
    assert changed > 0, f"{mutation.name}: the mutation changed nothing the engine decides"


def test_an_early_return_in_every_function_the_reading_relies_on(tmp_path: Path) -> None:
    """The general mechanism: every dispatch function artune fingerprints for 0.5.23, made to return at once
    (None; a constructor disabled first, as the communicators' own early returns do, since GroupCoordinator
    reads ``disabled`` of whatever it built). artune follows each, or names it where it decides otherwise."""
    root = release("0.5.23")
    # the launchers, capture() and _init_workspace are relied on, not run: a change there is named by its
    # fingerprint (test_a_changed_function_artune_relies_on_is_named)
    files = {"custom_all_reduce_v2.py": V2, "custom_all_reduce.py": DISPATCHER}
    # what only the ROCm readings run (quick_all_reduce.py) is tests/test_sglang_rocm.py's
    evaluated = [e for e in oracle.evaluated(root) if Path(e.where.rsplit(":", 1)[0]).name in files]
    functions = {e.function: e.where for e in evaluated if e.function not in RELIED_ON}
    assert {"dispatch_custom_allreduce", "can_use_custom_all_reduce_v2", "CustomAllReduceV2._pick_config"} <= set(
        functions
    )
    for index, (function, where) in enumerate(sorted(functions.items())):
        relative = files[Path(where.rsplit(":", 1)[0]).name]
        env = V1_OFF if function.startswith("CustomAllreduce.") else {}
        early = "self.disabled = True\nreturn" if function.endswith(".__init__") else "return None"
        mutation = Mutation(f"{function} returns at once", relative, at_start(function, early), function, env)
        verdict(root, mutation, tmp_path / str(index))


def test_a_changed_function_artune_relies_on_is_named(tmp_path: Path) -> None:
    """The launcher is not run by the reading (it runs what the dispatch picked): changed, it is named by its
    fingerprint (E402, "differs from every release artune was checked against") on every table."""
    root = release("0.5.23")
    mutation = Mutation(
        "the eager launcher runs one-shot push whatever was picked",
        V2,
        replace_text(
            "module.all_reduce(self.obj, input, algo_name, None, use_multicast)",
            "module.all_reduce(self.obj, input, '1shot_push', None, False)",
        ),
        "CustomAllReduceV2.custom_all_reduce",
    )
    changed_root = mutated(root, tmp_path, mutation)
    ps = [p for p in probes(changed_root, {}) if p.mode == "eager"]
    assert oracle.engine_decisions(changed_root, ps) != oracle.engine_decisions(root, ps)
    tables = read_sglang(str(changed_root)).tables
    for table in (*tables.tables.values(), tables.default):
        (caveat,) = [c for c in table.caveats if c.kind is CaveatKind.UNFAMILIAR]
        assert caveat.function == mutation.function and caveat.world_sizes == ()
        assert caveat.detail == "differs from every release artune was checked against; nearest 0.5.23"
    assert not [c for t in read_sglang(str(root)).tables.tables.values() for c in t.caveats]  # 0.5.23 as verified


ODD = [
    # (file, edit, the function a caveat must name)
    (
        V2,
        replace_text(
            "        device: torch.device,\n        max_size",
            "        device: torch.device,\n        rank: int,\n        max_size",
        ),
        "CustomAllReduceV2.__init__",
    ),
    (V2, replace_text("def _pick_config(", "def _choose_config("), "CustomAllReduceV2"),
    (
        V2,
        replace_text(
            "    def should_custom_ar(self, inp: torch.Tensor) -> bool:",
            "    def admits(self, inp: torch.Tensor) -> bool:",
        ),
        "CustomAllReduceV2",
    ),
    (
        V2,
        guard("CustomAllReduceV2._pick_config", 0, "match nbytes:\n    case 0:\n        return None"),
        "CustomAllReduceV2._pick_config",
    ),
    (
        V2,
        replace_text("    def _pick_config(", "    @torch.compiler.disable\n    def _pick_config("),
        "CustomAllReduceV2",
    ),
    (
        DISPATCHER,
        replace_text("def dispatch_custom_allreduce(", "def pick_custom_allreduce("),
        "dispatch_custom_allreduce",
    ),
    (CONFIGS, replace_text("def get_all_reduce_config(", "def all_reduce_config_for("), "CustomAllReduceV2.__init__"),
]


@pytest.mark.parametrize(
    ("file", "edit", "function"), ODD, ids=[f"{Path(f).name}-{i}" for i, (f, _e, _n) in enumerate(ODD)]
)
def test_no_reading_of_the_engines_own_files_exits_2(file: str, edit: Edit, function: str, tmp_path: Path) -> None:
    """A new signature, a renamed dispatch function or predicate, a statement or decorator the evaluator does not
    model: the release still reads, and a caveat names the function."""
    changed = mutated(release("0.5.23"), tmp_path, Mutation("odd", file, edit, function))
    tables = read_sglang(str(changed)).tables
    named = {c.function for t in tables.tables.values() for c in t.caveats if c.kind is CaveatKind.UNEVALUATED}
    assert function in named, named
