"""TensorRT-LLM's all-reduce header read exactly: its tables, its selection rules and its workspace cap.

``cpp/tensorrt_llm/common/customAllReduceUtils.h`` holds, per SM version, a
table ``AllReduceBestStrategyTableSM<N>`` of strategy enum ints, the map
``AllReduceBestStrategyTable`` from SM version to table, and
``selectStrategyLookUpTable(num_tokens, hidden_size, fusionOp, tp_size)``,
which maps the SM version (``if (sm_version < 100) sm_version = 90;`` ...),
turns each argument into an index (``static_cast<size_t>(std::log2(x) - k)``:
truncated, so 6 reads 4's row and 5120 reads 4096's), looks the fused op up
in ``mapFusionOpToIndex``, and returns a fallback strategy when any index is
out of range. This module reads those statements as the revision writes
them: the mapping thresholds, the offsets, the subscript order and the
fallback all come from the file. A statement of another shape (an early
return, a different bounds test, a cast before the subtraction) is a
``TableError`` naming the file and line: artune never guesses what a
revision runs.

``getMaxRequiredWorkspaceSize(worldSize)`` is read the same way: older
revisions return ``16 * 1000 * 1000`` for two ranks and ``8 * 1000 * 1000``
above; newer ones ``TRTLLM_ALLREDUCE_FUSION_WORKSPACE_SIZE`` or 64 MiB.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from artune.errors import TableError
from artune.formats.files import SourceFile
from artune.formats.trtllm.cxx import Brace, CxxText, int_expr, line_at, strip_comments

#: the arguments of ``selectStrategyLookUpTable`` and the axis each indexes
ARGUMENTS = {"tp_size": "tp", "num_tokens": "tokens", "hidden_size": "hidden"}
AXES = ("tp", "fusion", "hidden", "tokens")

_TABLE = re.compile(r"AllReduceBestStrategyTableType\s+(AllReduceBestStrategyTableSM(\d+))\s*=\s*\{")
_MAP = re.compile(
    r"unordered_map<\s*int\s*,\s*AllReduceBestStrategyTableType\s*>\s*AllReduceBestStrategyTable\s*=\s*\{"
)
_FUSION_MAP = re.compile(r"unordered_map<\s*AllReduceFusionOp\s*,\s*int\s*>\s*mapFusionOpToIndex\s*=\s*\{")
_CONSTANT = re.compile(r"(?:constexpr\s+int|auto\s+const)\s+(k\w+)\s*=\s*(\d+)\s*;")
_SELECT = re.compile(r"AllReduceStrategyType\s+selectStrategyLookUpTable\s*\(([^)]*)\)\s*\{")
_WORKSPACE = re.compile(r"size_t\s+getMaxRequiredWorkspaceSize\s*\(\s*int\s+(\w+)\s*\)\s*(?:noexcept\s*)?\{")

_SM_DEF = re.compile(r"^auto (\w+) = tensorrt_llm::common::getSMVersion\(\);$")
_LOG2_DEF = re.compile(r"^auto (\w+) = static_cast<size_t>\(std::log2\((\w+)\)(?: - (\d+))?\);$")
_FUSION_DEF = re.compile(r"^auto (\w+) = static_cast<size_t>\(mapFusionOpToIndex\.find\((\w+)\)->second\);$")
_SM_RULE = re.compile(r"^if \((\w+) (<|<=|>|>=|==) (\d+)\) \{ (\w+) = (\d+); \}$")
_BOUNDS = re.compile(r"^if \((AllReduceBestStrategyTable\.find\(.*)\) \{ return AllReduceStrategyType::(\w+); \}$")
_LOOKUP = re.compile(
    r"^return static_cast<AllReduceStrategyType>\( ?AllReduceBestStrategyTable\.at\((\w+)\)"
    r"\[(\w+)\]\[(\w+)\]\[(\w+)\]\[(\w+)\]\);$"
)


@dataclass(frozen=True)
class Index:
    """How ``selectStrategyLookUpTable`` turns one argument into an index: ``(size_t)(log2(argument) - offset)``."""

    axis: str
    argument: str
    offset: int
    line: int

    def of(self, value: int) -> int | None:
        """The index ``value`` reads, as the cast truncates it (toward zero: -0.4 reads 0); ``None`` where the
        cast's input is -1 or below (undefined in C++; out of every table's range on the machines it runs on)."""
        raw = math.log2(value) - self.offset if value > 0 else -math.inf
        return None if raw <= -1 else int(raw)

    def row(self, index: int) -> int:
        """The smallest value that reads row ``index``: ``2 ** (index + offset)``."""
        return 1 << (index + self.offset)


@dataclass(frozen=True)
class SmRule:
    """``if (sm_version OP threshold) { sm_version = value; }``, applied in the file's order."""

    op: str
    threshold: int
    value: int
    line: int

    def applies(self, sm: int) -> bool:
        """Whether the rule's test holds for ``sm``."""
        return {
            "<": sm < self.threshold,
            "<=": sm <= self.threshold,
            ">": sm > self.threshold,
            ">=": sm >= self.threshold,
            "==": sm == self.threshold,
        }[self.op]


@dataclass(frozen=True)
class StrategyGrid:
    """One SM version's table: ``cells[tp][fusion][hidden][tokens]`` (in the function's subscript order)."""

    sm: int
    name: str
    root: Brace
    line: int

    def cells(self) -> dict[tuple[int, int, int, int], int]:
        """Every cell by its four indices in subscript order."""
        out: dict[tuple[int, int, int, int], int] = {}
        for a, b_ in enumerate(self.root.items):
            for b, c_ in enumerate(_items(b_)):
                for c, d_ in enumerate(_items(c_)):
                    for d, value in enumerate(_items(d_)):
                        out[(a, b, c, d)] = value  # type: ignore[assignment]
        return out

    def rows(self) -> dict[tuple[int, int, int], Brace]:
        """The innermost rows by their first three indices, each with its line."""
        out: dict[tuple[int, int, int], Brace] = {}
        for a, b_ in enumerate(self.root.items):
            for b, c_ in enumerate(_items(b_)):
                for c, d_ in enumerate(_items(c_)):
                    assert isinstance(d_, Brace)
                    out[(a, b, c)] = d_
        return out


def _items(node: int | Brace) -> tuple[int | Brace, ...]:
    assert isinstance(node, Brace)
    return node.items


@dataclass(frozen=True)
class Workspace:
    """``getMaxRequiredWorkspaceSize``: ``env`` (``""``: none) overrides; else the first ``(ws <= N, bytes)``
    that holds, else ``default``."""

    env: str
    by_world: tuple[tuple[int, int], ...]
    default: int
    line: int

    def caps(self) -> tuple[tuple[int | None, int], ...]:
        """The default caps as ``Table.caps``: ``(most world size, bytes)``, then ``(None, default)``."""
        return (*self.by_world, (None, self.default))

    def cap(self, world_size: int, environ: Mapping[str, str] | None = None) -> int:
        """The workspace in bytes at ``world_size`` (``environ``: the serving process's environment)."""
        if self.env and environ is not None and self.env in environ:
            return _atoi(environ[self.env])
        for most, value in self.by_world:
            if world_size <= most:
                return value
        return self.default


def _atoi(text: str) -> int:
    """C's ``atoi``: leading spaces, an optional sign, digits; 0 when there are none."""
    found = re.match(r"\s*([+-]?\d+)", text)
    return int(found.group(1)) if found else 0


@dataclass(frozen=True)
class LookupHeader:
    """What one revision's header says, every part with its line."""

    file: SourceFile
    grids: dict[int, StrategyGrid]
    sm_argument: str
    sm_rules: tuple[SmRule, ...]
    indices: dict[str, Index]
    order: tuple[str, ...]
    fusion_index: dict[str, int]
    fusion_line: int
    fallback: str
    fallback_line: int
    constants: dict[str, tuple[int, int]] = field(default_factory=dict)
    workspace: Workspace | None = None
    select_line: int = 0

    def where(self, line: int) -> str:
        """``file:line`` for findings."""
        return f"{self.file.label}:{line}"

    def table_sm(self, sm: int) -> int:
        """The SM version whose table ``sm`` reads, after the file's mapping rules."""
        for rule in self.sm_rules:
            if rule.applies(sm):
                sm = rule.value
        return sm

    def lookup(self, sm: int, tokens: int, hidden: int, fusion: str, tp: int) -> str | int:
        """The header's own answer: a cell's int, or the fallback's enum name when any index is out of range."""
        grid = self.grids.get(self.table_sm(sm))
        wanted = {"tp": tp, "tokens": tokens, "hidden": hidden}
        found: list[int] = []
        node: int | Brace | None = grid.root if grid is not None else None
        for axis in self.order:
            index = self.fusion_index.get(fusion) if axis == "fusion" else self.indices[axis].of(wanted[axis])
            if not isinstance(node, Brace) or index is None or index >= len(node.items):
                return self.fallback
            found.append(index)
            node = node.items[index]
        assert isinstance(node, int)
        return node


def parse_header(file: SourceFile) -> LookupHeader:
    """Read one revision's ``customAllReduceUtils.h``; ``TableError`` at the file and line of what is not
    in the shape this module reads."""
    src = CxxText(file.label, strip_comments(file.text))
    select = _SELECT.search(src.text)
    if select is None:
        raise TableError(
            f"{file.label}: no selectStrategyLookUpTable(...) here; this revision has no lookup table "
            "(an older header sizes the workspace only), or the file is not TensorRT-LLM's customAllReduceUtils.h"
        )
    rules = _read_select(src, select)
    tables = {int(m.group(2)): (m.group(1), m.end() - 1) for m in _TABLE.finditer(src.text)}
    grids = _read_map(src, tables, rules["order"])
    fusion, fusion_line = _read_fusion_map(src)
    constants = {m.group(1): (int(m.group(2)), line_at(src.text, m.start())) for m in _CONSTANT.finditer(src.text)}
    return LookupHeader(
        file=file,
        grids=grids,
        sm_argument=rules["sm"],
        sm_rules=rules["sm_rules"],
        indices=rules["indices"],
        order=rules["order"],
        fusion_index=fusion,
        fusion_line=fusion_line,
        fallback=rules["fallback"],
        fallback_line=rules["fallback_line"],
        constants=constants,
        workspace=_read_workspace(src),
        select_line=line_at(src.text, select.start()),
    )


def _read_select(src: CxxText, select: re.Match[str]) -> dict[str, object]:
    """The statements of ``selectStrategyLookUpTable``, each in the one shape artune reads."""
    params = [p.split()[-1] for p in select.group(1).split(",")]
    if sorted(params) != sorted(["num_tokens", "hidden_size", "fusionOp", "tp_size"]):
        raise src.error(select.start(), f"selectStrategyLookUpTable({select.group(1).strip()}): unknown parameters")
    begin, end = src.block(select.end() - 1)
    names: dict[str, str] = {}  # variable -> axis
    indices: dict[str, Index] = {}
    sm = ""
    sm_rules: list[SmRule] = []
    fallback, fallback_line, order = "", 0, ()
    for offset, stmt in src.statements(begin, end):
        line = line_at(src.text, offset)
        if m := _SM_DEF.match(stmt):
            sm = m.group(1)
        elif m := _LOG2_DEF.match(stmt):
            axis = ARGUMENTS.get(m.group(2))
            if axis is None:
                raise src.error(offset, f"{stmt!r}: log2 of {m.group(2)}, not one of {', '.join(ARGUMENTS)}")
            names[m.group(1)] = axis
            indices[axis] = Index(axis, m.group(2), int(m.group(3) or 0), line)
        elif m := _FUSION_DEF.match(stmt):
            names[m.group(1)] = "fusion"
        elif (m := _SM_RULE.match(stmt)) and sm and m.group(1) == sm == m.group(4):
            sm_rules.append(SmRule(m.group(2), int(m.group(3)), int(m.group(5)), line))
        elif (m := _BOUNDS.match(stmt)) and not fallback:
            fallback, fallback_line = m.group(2), line
            bounds = m.group(1)
        elif (m := _LOOKUP.match(stmt)) and fallback and m.group(1) == sm:
            order = tuple(names.get(v, "") for v in m.groups()[1:])
        else:
            raise src.error(offset, f"{stmt[:90]!r} in selectStrategyLookUpTable: a statement artune does not read")
    if set(order) != set(AXES) or set(indices) != set(ARGUMENTS.values()) or not sm:
        raise src.error(select.start(), "selectStrategyLookUpTable: the indices and the lookup are not all there")
    variables = {axis: var for var, axis in names.items()}
    if " ".join(bounds.split()) != _expected_bounds(sm, [variables[a] for a in order]):
        raise src.error(
            select.start(),
            "selectStrategyLookUpTable: the out-of-range test is not the one that "
            "checks every index against its table's size",
        )
    return {
        "sm": sm,
        "sm_rules": tuple(sm_rules),
        "indices": indices,
        "order": order,
        "fallback": fallback,
        "fallback_line": fallback_line,
    }


def _expected_bounds(sm: str, variables: list[str]) -> str:
    """The bounds test of the revisions artune reads: the SM is in the map, every index below its size."""
    table = f"AllReduceBestStrategyTable.at({sm})"
    parts = [f"AllReduceBestStrategyTable.find({sm}) == AllReduceBestStrategyTable.end()"]
    for i, var in enumerate(variables):
        parts.append(f"{var} >= {table}" + "".join(f".at({v})" for v in variables[:i]) + ".size()")
    return " || ".join(parts)


def _read_map(src: CxxText, tables: dict[int, tuple[str, int]], order: tuple[str, ...]) -> dict[int, StrategyGrid]:
    found = _MAP.search(src.text)
    if found is None:
        raise TableError(f"{src.name}: no AllReduceBestStrategyTable = {{...}} map from SM version to table")
    begin, end = src.block(found.end() - 1)
    by_name = {name: (sm, start) for sm, (name, start) in tables.items()}
    grids: dict[int, StrategyGrid] = {}
    entry = re.compile(r"\{\s*(\d+)\s*,\s*(\w+)\s*\}")
    body = src.text[begin:end]
    rest = entry.sub("", body).replace(",", "")
    if rest.strip():
        raise src.error(begin + body.find(rest.strip()[:10]), f"{rest.strip()[:60]!r} in AllReduceBestStrategyTable")
    for m in entry.finditer(body):
        sm, name = int(m.group(1)), m.group(2)
        if name not in by_name:
            raise src.error(begin + m.start(), f"{name}: not a table defined in this file")
        brace, _after = src.brace(by_name[name][1])
        if brace.depth() != 4:
            raise src.error(
                by_name[name][1], f"{name}: {brace.depth()} levels of braces, not the 4 of [{']['.join(order)}]"
            )
        grids[sm] = StrategyGrid(sm, name, brace, brace.line)
    if not grids:
        raise src.error(found.start(), "AllReduceBestStrategyTable maps no SM version to a table")
    return grids


def _read_fusion_map(src: CxxText) -> tuple[dict[str, int], int]:
    found = _FUSION_MAP.search(src.text)
    if found is None:
        raise TableError(f"{src.name}: no mapFusionOpToIndex = {{...}}: which fused op reads which plane is unknown")
    begin, end = src.block(found.end() - 1)
    body = src.text[begin:end]
    entry = re.compile(r"\{\s*AllReduceFusionOp::(\w+)\s*,\s*(\d+)\s*\}\s*,?")
    out: dict[str, int] = {}
    rest = entry.sub("", body)
    if rest.strip():
        raise src.error(begin + body.find(rest.strip()[:10]), f"{rest.strip()[:60]!r} in mapFusionOpToIndex")
    for m in entry.finditer(body):
        out[m.group(1)] = int(m.group(2))
    return out, line_at(src.text, found.start())


def _read_workspace(src: CxxText) -> Workspace | None:
    found = _WORKSPACE.search(src.text)
    if found is None:
        return None
    ws = found.group(1)
    begin, end = src.block(found.end() - 1)
    line = line_at(src.text, found.start())
    env, by_world, default = "", [], None
    pending_env = ""
    for offset, stmt in src.statements(begin, end):
        where = f"{src.name}:{line_at(src.text, offset)}"
        if stmt.startswith("if (common::getEnvForceDeterministicAllReduce())"):
            continue  # forced-deterministic runs size it from their own environment; not the default path
        if m := re.match(r'^char const\* (\w+) = std::getenv\("(\w+)"\);$', stmt):
            pending_env = m.group(2)
        elif pending_env and re.match(
            r"^if \(\w+ != nullptr\) \{ return static_cast<size_t>\(std::atoi\(\w+\)\); \}$", stmt
        ):
            env = pending_env
        elif m := re.match(rf"^if \({ws} <= (\d+)\) \{{ return (.+); \}}$", stmt):
            by_world.append((int(m.group(1)), int_expr(m.group(2), where)))
        elif m := re.match(r"^return (.+);$", stmt):
            default = int_expr(m.group(1), where)
        else:
            raise TableError(f"{where}: {stmt[:90]!r} in getMaxRequiredWorkspaceSize: a statement artune does not read")
    if default is None:
        raise src.error(found.start(), "getMaxRequiredWorkspaceSize has no final return")
    return Workspace(env, tuple(by_world), default, line)
