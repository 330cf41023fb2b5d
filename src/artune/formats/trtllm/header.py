"""TensorRT-LLM's all-reduce header: its functions to run, its constants, and the facts a reviewer asks about.

``cpp/tensorrt_llm/common/customAllReduceUtils.h`` holds, per SM version, a
table ``AllReduceBestStrategyTableSM<N>`` of strategy enum ints, the map
``AllReduceBestStrategyTable`` from SM version to table, the map
``mapFusionOpToIndex`` from fused op to plane, and two functions:
``selectStrategyLookUpTable(num_tokens, hidden_size, fusionOp, tp_size)``,
which the engine's AUTO strategy asks, and
``getMaxRequiredWorkspaceSize(worldSize)``, the workspace that caps the
messages the custom kernels take. Both are parsed (``syntax``) and run
(``evaluate``) as the revision writes them; their globals are read from the
file when a run needs them (``Globals``). Nothing is assumed about their
statements: an early return, another bounds test, another SM mapping all
decide as written.

Beside that, ``LookupHeader`` keeps what a reviewer's findings
(``artune.formats.trtllm.checks``) name by line: the tables with a line
per row, the SM mapping rules, the ``log2`` indices, the out-of-range
strategy and the ``k...Choice`` constants, each where the revision writes it
in the shape TensorRT-LLM's revisions use, and absent otherwise (those
findings are then not made; the decisions never depend on them).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from artune.errors import Raised, TableError, Unsupported
from artune.formats.files import SourceFile
from artune.formats.trtllm import syntax
from artune.formats.trtllm.cxx import Brace, CxxText, line_at, strip_comments
from artune.formats.trtllm.evaluate import AXES, CxxFunction, V, evaluate_constant
from artune.formats.trtllm.syntax import Braced, Expr, parse_body, parse_expression

SELECT = "selectStrategyLookUpTable"
WORKSPACE = "getMaxRequiredWorkspaceSize"
ENUM_TYPES = ("AllReduceStrategyType", "AllReduceFusionOp")
#: the axes of ``selectStrategyLookUpTable``'s structured facts, in the tables' subscript order
AXIS_NAMES = ("tp", "fusion", "hidden", "tokens")

_TABLE = re.compile(r"AllReduceBestStrategyTableType\s+(AllReduceBestStrategyTableSM(\d+))\s*=\s*\{")
_MAP = re.compile(
    r"unordered_map<\s*int\s*,\s*AllReduceBestStrategyTableType\s*>\s*AllReduceBestStrategyTable\s*=\s*\{"
)
_FUSION_MAP = re.compile(r"unordered_map<\s*AllReduceFusionOp\s*,\s*int\s*>\s*mapFusionOpToIndex\s*=\s*\{")
_CONSTANT = re.compile(r"(?:constexpr\s+int|auto\s+const)\s+(k\w+)\s*=\s*(\d+)\s*;")
_LOG2_DEF = re.compile(r"^auto (\w+) = static_cast<size_t>\(std::log2\((\w+)\)(?: - (\d+))?\);$")
_SM_RULE = re.compile(r"^(\w+) (<|<=|>|>=|==) (\d+)$")
_GETENV = re.compile(r'std::getenv\("(\w+)"\)')


@dataclass(frozen=True)
class Index:
    """How ``selectStrategyLookUpTable`` turns one argument into an index: ``(size_t)(log2(argument) - offset)``."""

    axis: str
    argument: str
    offset: int
    line: int

    def of(self, value: int) -> int | None:
        """The index ``value`` reads (truncated toward zero); ``None`` where the cast's input is -1 or below
        (g++ then wraps it far out of every table's range)."""
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
    """One SM version's table as written: ``[tp][fusion][hidden][tokens]``, each row with its line."""

    sm: int
    name: str
    root: Brace
    line: int

    def rows(self) -> dict[tuple[int, int, int], Brace]:
        """The innermost rows by their first three indices."""
        out: dict[tuple[int, int, int], Brace] = {}
        for a, planes in enumerate(self.root.items):
            for b, hidden_rows in enumerate(_items(planes)):
                for c, row in enumerate(_items(hidden_rows)):
                    if isinstance(row, Brace):
                        out[(a, b, c)] = row
        return out


def _items(node: int | Brace) -> tuple[int | Brace, ...]:
    return node.items if isinstance(node, Brace) else ()


@dataclass(frozen=True)
class Workspace:
    """``getMaxRequiredWorkspaceSize`` as run with the default environment: ``(most world size, bytes)`` pairs,
    the last for every larger world size (``most`` None); ``env`` the variable that overrides it ("": none)."""

    caps: tuple[tuple[int | None, int], ...]
    env: str
    line: int

    def cap(self, world_size: int) -> int:
        """The workspace in bytes at ``world_size``."""
        return next(nbytes for most, nbytes in self.caps if most is None or world_size <= most)


@dataclass
class LookupHeader:
    """What one revision's header holds: its functions to run and the facts its findings name by line.

    The facts (``grids`` to ``constants``) are ``{}``, ``()`` or ``""`` where the revision does not write them
    in TensorRT-LLM's shape."""

    file: SourceFile
    text: str  # comments blanked, offsets kept
    select: CxxFunction | None
    workspace_function: CxxFunction | None
    globals: Globals
    grids: dict[int, StrategyGrid] = field(default_factory=dict)
    sm_rules: tuple[SmRule, ...] = ()
    indices: dict[str, Index] = field(default_factory=dict)
    fusion_index: dict[str, int] = field(default_factory=dict)
    fallback: str = ""  # the out-of-range strategy's enum name
    fallback_line: int = 0
    constants: dict[str, tuple[int, int]] = field(default_factory=dict)
    workspace: Workspace | None = None

    def where(self, line: int) -> str:
        """``file:line`` for findings."""
        return f"{self.file.label}:{line}"

    @property
    def select_line(self) -> int:
        return int(self.select.where.rsplit(":", 1)[1]) if self.select else 1

    def table_sm(self, sm: int) -> int:
        """The SM version whose table ``sm`` reads, after the file's mapping rules."""
        for rule in self.sm_rules:
            if rule.applies(sm):
                sm = rule.value
        return sm


class Globals:
    """The header's globals, each read from its definition the first time a run names it."""

    def __init__(self, src: CxxText, enums: Mapping[str, Mapping[str, int]], bodies: list[tuple[int, int]]) -> None:
        self.src = src
        self.enums = enums
        self.bodies = bodies  # the functions' bodies: a name defined inside one is a local, not a global
        self.values: dict[str, V | None] = {}
        self.lines: dict[str, int] = {}
        #: what could not be read of a global the functions use: name -> (line, why); its entries or itself left out
        self.problems: dict[str, tuple[int, str]] = {}

    def __call__(self, name: str) -> V | None:
        if name not in self.values:
            self.values[name] = None  # a definition that names itself reads as undefined
            self.values[name] = self._define(name)
        return self.values[name]

    def _define(self, name: str) -> V | None:
        text = self.src.text
        pattern = rf"^[ \t]*((?:[\w:<>,]+[ \t*&]+)+){re.escape(name)}\s*(=(?!=)|\{{)"
        for found in re.finditer(pattern, text, re.M):
            if any(begin <= found.start() < end for begin, end in self.bodies):
                continue
            type_ = " ".join(found.group(1).split())
            if found.group(2) == "{" and "(" in type_:
                continue
            begin = found.end() if found.group(2) == "=" else found.end() - 1
            end = _statement_end(text, begin)
            line = self.lines[name] = line_at(text, found.start())
            problems: list[str] = []
            try:
                value = _constant(parse_expression(text, begin, end), type_, self, problems)
            except (Unsupported, Raised) as err:
                self.problems[name] = (line, str(err))
                return None
            if problems:
                self.problems[name] = (line, "; ".join(problems))
            return value
        return None


def _statement_end(text: str, begin: int) -> int:
    depth = 0
    for pos in range(begin, len(text)):
        ch = text[pos]
        if ch in "({[":
            depth += 1
        elif ch in ")}]":
            depth -= 1
        elif ch == ";" and depth == 0:
            return pos
    return len(text)


def _constant(node: Expr, type_: str, names: Globals, problems: list[str]) -> V:
    """The value of a global's initializer, as its declared type reads it; a map entry that cannot be read is
    left out and said in ``problems``."""
    if isinstance(node, Braced):
        if "map" in type_:
            out: dict[object, object] = {}
            for i, item in enumerate(node.items, start=1):
                if not isinstance(item, Braced) or len(item.items) != 2:
                    problems.append(f"entry {i} is not {{key, value}}: left out")
                    continue
                try:
                    key, value = (_constant(part, "", names, problems) for part in item.items)
                except (Unsupported, Raised) as err:
                    problems.append(f"entry {i} left out: {err}")
                    continue
                out[key.value] = value.value
            return V(out, "map")
        return V(tuple(_constant(item, "", names, problems).value for item in node.items), "vec")
    value = evaluate_constant(node, names, names.enums)
    kind = {"size_t": "size_t", "int": "int", "double": "double", "bool": "bool"}.get(
        type_.split()[-1] if type_ else ""
    )
    return value if kind is None or value.kind in ("map", "vec") else V(value.value, kind)


def _function(src: CxxText, name: str, axes: Mapping[str, int], bodies: list[tuple[int, int]]) -> CxxFunction | None:
    """``name``'s definition: its parameters mapped to axes, its body parsed. ``None`` when the file has none."""
    found = re.search(rf"\b{name}\s*\(([^)]*)\)\s*(?:const\s*)?(?:noexcept\s*)?\{{", src.text)
    if found is None:
        return None
    begin, end = src.block(found.end() - 1)
    bodies.append((begin, end))
    params = []
    for raw in found.group(1).split(","):
        words = raw.replace("&", " ").split()
        if not words:
            continue
        param, type_ = words[-1], " ".join(words[:-1])
        axis = _axis(param, type_, axes)
        if axis is None:
            raise Unsupported(f"{name}: the parameter {raw.strip()!r} is none of {', '.join(axes)}")
        kind = "enum" if "FusionOp" in type_ else ("size_t" if "size_t" in type_ else "int")
        params.append((param, axis, kind))
    start = src.text.rfind("\n", 0, found.start()) + 1
    return CxxFunction(
        name,
        f"{src.name}:{line_at(src.text, found.start())}",
        tuple(params),
        parse_body(src.text, begin, end),
        src.text[start : end + 1],
    )


def _axis(param: str, type_: str, axes: Mapping[str, int]) -> int | None:
    """Which input a parameter is, by its type and name."""
    lowered = param.lower()
    if "FusionOp" in type_:
        return axes.get("fusion")
    for word, axis in (("token", "tokens"), ("hidden", "hidden"), ("tp", "tp"), ("world", "tp")):
        if word in lowered and axis in axes:
            return axes[axis]
    return None


def parse_header(file: SourceFile, enums: Mapping[str, Mapping[str, int]]) -> LookupHeader:
    """Read one revision's ``customAllReduceUtils.h``: its two functions (parsed, ready to run), its globals and
    the facts findings name. ``TableError`` only for a file that has neither function: not this header."""
    src = CxxText(file.label, strip_comments(file.text))
    axes = {name: AXES.index(name) for name in ("fusion", "tp", "hidden", "tokens")}
    bodies: list[tuple[int, int]] = []
    try:
        select = _function(src, SELECT, axes, bodies)
        workspace = _function(src, WORKSPACE, {"tp": AXES.index("tp")}, bodies)
    except Unsupported as err:
        raise TableError(f"{file.label}: {err}") from None
    if select is None and workspace is None:
        raise TableError(
            f"{file.label}: neither {SELECT}(...) nor {WORKSPACE}(...) is here; is this TensorRT-LLM's "
            "cpp/tensorrt_llm/common/customAllReduceUtils.h?"
        )
    header = LookupHeader(file, src.text, select, workspace, Globals(src, enums, bodies))
    if select is not None:
        _read_facts(header, src)
    return header


def _read_facts(header: LookupHeader, src: CxxText) -> None:
    """The facts findings name by line, where the revision writes them in TensorRT-LLM's shape."""
    assert header.select is not None
    names: dict[str, str] = {}  # variable -> axis
    sm = ""
    rules: list[SmRule] = []
    for stmt in header.select.body:
        text = " ".join(stmt.text.split())
        if (m := _LOG2_DEF.match(text)) and m.group(2) in (p for p, _a, _k in header.select.params):
            axis = {"num_tokens": "tokens", "hidden_size": "hidden", "tp_size": "tp"}.get(m.group(2))
            if axis:
                names[m.group(1)] = axis
                header.indices[axis] = Index(axis, m.group(2), int(m.group(3) or 0), stmt.line)
        elif text.startswith("auto ") and "getSMVersion()" in text:
            sm = text.split()[1]
        elif isinstance(stmt, syntax.If) and (m := _SM_RULE.match(text)) and m.group(1) == sm:
            assigned = stmt.then[0].text if len(stmt.then) == 1 else ""
            if (a := re.fullmatch(rf"{sm} = (\d+);", " ".join(assigned.split()))) is not None:
                rules.append(SmRule(m.group(2), int(m.group(3)), int(a.group(1)), stmt.line))
        elif isinstance(stmt, syntax.If) and "AllReduceBestStrategyTable.end()" in text:
            then = stmt.then
            if len(then) == 1 and (r := re.fullmatch(r"return AllReduceStrategyType::(\w+);", then[0].text)):
                header.fallback, header.fallback_line = r.group(1), then[0].line
    header.sm_rules = tuple(rules)
    tables = {int(m.group(2)): (m.group(1), m.end() - 1) for m in _TABLE.finditer(src.text)}
    header.grids = _read_grids(src, tables)
    header.fusion_index = _read_fusion_map(src)
    header.constants = {
        m.group(1): (int(m.group(2)), line_at(src.text, m.start())) for m in _CONSTANT.finditer(src.text)
    }


def _read_grids(src: CxxText, tables: dict[int, tuple[str, int]]) -> dict[int, StrategyGrid]:
    """The tables the SM map names, each with a line per row ({} where the map is not written as ``{SM, NAME}``)."""
    found = _MAP.search(src.text)
    if found is None:
        return {}
    begin, end = src.block(found.end() - 1)
    by_name = {name: start for _sm, (name, start) in tables.items()}
    grids: dict[int, StrategyGrid] = {}
    for m in re.finditer(r"\{\s*(\d+)\s*,\s*(\w+)\s*\}", src.text[begin:end]):
        sm, name = int(m.group(1)), m.group(2)
        if name not in by_name:
            continue
        try:
            brace, _after = src.brace(by_name[name])
        except TableError:
            continue
        if brace.depth() == 4:
            grids[sm] = StrategyGrid(sm, name, brace, brace.line)
    return grids


def _read_fusion_map(src: CxxText) -> dict[str, int]:
    found = _FUSION_MAP.search(src.text)
    if found is None:
        return {}
    begin, end = src.block(found.end() - 1)
    return {
        m.group(1): int(m.group(2))
        for m in re.finditer(r"\{\s*AllReduceFusionOp::(\w+)\s*,\s*(\d+)\s*\}", src.text[begin:end])
    }


def workspace_env(function: CxxFunction) -> str:
    """The environment variable ``getMaxRequiredWorkspaceSize`` reads ("" when it reads none)."""
    found = _GETENV.search(function.text)
    return found.group(1) if found else ""


__all__ = [
    "SELECT",
    "WORKSPACE",
    "Globals",
    "Index",
    "LookupHeader",
    "SmRule",
    "StrategyGrid",
    "Workspace",
    "parse_header",
    "workspace_env",
]
