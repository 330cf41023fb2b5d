"""Read SGLang's custom all-reduce v2 configs from a checkout (``artune import sglang PATH``, ``sglang:PATH``).

SGLang's configs are code: helper calls, ``_config_builder`` closures,
lambdas, one function per arch taking the SM count, a dispatch on
``torch.cuda.get_device_capability()``. Two ways to read them were weighed:
running the module in a child process with SGLang's imports stubbed and
``torch.cuda`` faked, or interpreting the restricted subset the configs are
written in. **This reader interprets** (``artune.formats.pyeval``): the file
is parsed with ``ast`` and walked by artune's own evaluator, which has no
``import``, no I/O, no attribute access on real objects, no ``while`` or
``try``, and a step budget. Nothing from the checkout is executed, so
importing a pull request's file is as safe as reading it; the cost is that a
construct outside the subset is an error (exit 2) naming the file, line and
construct, never a guess. ``torch.cuda`` is faked inside the evaluator only:
``get_device_capability`` answers each probed arch and
``get_device_properties(..).multi_processor_count`` the SM count (132 for
9.x, as tuned on H200; 148 for 10.x before 10.7, as tuned on B200; the
symbol ``sms`` elsewhere, kept in the parameters as ``"sms"``).

Shapes (``engine-formats.md`` section 2): THRESHOLD_2_SHOT_MAP (2.0), one
builder per world size with ``Heuristic`` tuples (A, A' with ``lamport``),
one function per arch with ``two_shot_push`` and multinode push bands (B),
``(max_bytes, algo)`` tuple rows (C), ``Row`` helpers (D) and the split
``config/`` tuning package (E). The meaning of positional slots comes from
the ``Heuristic`` field order in the same file. Thresholds compare ``<=``
with SGLang's float values (``2.438 * MB`` admits 2556428 bytes), ranges are
inclusive both ends. The figures are kept as written; where SGLang's 16 MiB
default workspace (``SGLANG_CUSTOM_ALL_REDUCE_V2_MAX_SIZE_KB``) clips a
bound, a finding says so. Multinode push bands become extra tables keyed
``ARCH/multinode`` (their eager heuristic replaced, as SGLang does).
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from artune.errors import TableError
from artune.formats.engine import EngineImport, FindingSink
from artune.formats.pyeval import Function, Interpreter, Raised, Record, Symbol
from artune.formats.source import SourceFile, describe, find_files, read_source
from artune.sizes import format_size
from artune.table.check import copied_archs
from artune.table.family import TableSet
from artune.table.model import ParamValue, Plan, Platform, Provenance, Table, freeze_params
from artune.table.references.rules import Rule, bands_from_rules, upto

KB = 1024
MB = 1024 * KB
FILES = (
    "python/sglang/srt/distributed/device_communicators/configs/custom_all_reduce_v2.py",
    "python/sglang/srt/distributed/device_communicators/config/custom_all_reduce_v2_tuning.py",
    "python/sglang/srt/distributed/device_communicators/custom_all_reduce_v2.py",
)
WORKSPACE = 16 * 1024 * KB  # SGLANG_CUSTOM_ALL_REDUCE_V2_MAX_SIZE_KB default: 16 MiB
ALIGN = 1024  # the workspace is rounded up to 1 KiB
FALLBACK = "nccl"
# probed (major, minor), the SM count given, and the arch key when the answer is new
PROBES: tuple[tuple[tuple[int, int], int | None], ...] = (
    ((9, 0), 132),
    ((10, 0), 148),
    ((10, 3), 148),
    ((10, 7), None),
    ((12, 0), None),
)
DEFAULT_PROBE = ((8, 0), None)
_TUNINGS = re.compile(r"^_sm(\d{2,3})_tunings$")
_ALGOS = {
    "ONE_SHOT_PUSH": "1shot_push",
    "ONE_SHOT_PULL": "1shot_pull",
    "TWO_SHOT_PULL": "2shot_pull",
    "TWO_SHOT_PUSH": "2shot_push",
}


@dataclass(frozen=True)
class ArchConfig:
    """One (arch, world size): rules per mode, block counts, the file line of its row."""

    graph: tuple[Rule, ...]
    eager: tuple[Rule, ...]
    push: ParamValue | None
    pull: ParamValue | None
    mc: ParamValue | None
    line: int


def _fakes(cap: tuple[int, int], num_sm: int | None) -> dict[str, Any]:
    sms: Any = num_sm if num_sm is not None else Symbol("sms")
    props = MappingProxyType({"multi_processor_count": sms, "major": cap[0], "minor": cap[1]})
    return {
        "torch.cuda.get_device_capability": lambda *a: cap,
        "torch.cuda.get_device_properties": lambda *a: props,
        "torch.cuda.current_device": lambda: 0,
        "torch.cuda.is_available": lambda: True,
        "is_sm100_supported": lambda *a: cap[0] == 10,
        "is_sm90_supported": lambda *a: cap[0] == 9,
    }


def _value(value: Any) -> ParamValue | None:
    if value is None or isinstance(value, (int, float, str, bool)):
        return value
    if isinstance(value, Symbol):
        return str(value)
    raise TableError(f"block count {value!r} is not a number")


class _Shape:
    """Reads one file in one of SGLang's shapes."""

    def __init__(self, source: SourceFile) -> None:
        self.source = source
        self.names = _top_names(source.text, source.path)
        self.range_needs_positive = "max_bytes > 0" in source.text or "max_bytes>0" in source.text

    def interp(self, cap: tuple[int, int], num_sm: int | None) -> Interpreter:
        interp = Interpreter(self.source.text, self.source.path, fakes=_fakes(cap, num_sm))
        interp.run_module()
        return interp

    def fail(self, message: str, line: int | str = "?") -> TableError:
        return TableError(f"{self.source.path}:{line}: {message}")

    # -------------------------------------------------------- rows -> rules

    def range_rule(self, algorithm: str, value: Any, line: int) -> Rule | None:
        lo, hi = _pair(value, line, self)
        if hi <= 0 and (self.range_needs_positive or hi < 0):
            return None
        return Rule(algorithm, max(0, math.ceil(lo)), math.floor(hi))

    def heuristic_rules(self, h: Any, line: int) -> tuple[Rule, ...]:
        if not isinstance(h, Record):
            raise self.fail(f"expected a Heuristic, got {_short(h)}", line)
        fields = h.type.fields
        need = ("one_shot_push_threshold", "one_shot_pull_threshold", "two_shot_pull_threshold")
        if not all(f in fields for f in need):
            raise self.fail(f"{h.type.name} has fields {list(fields)}, not SGLang's Heuristic ones", line)
        unknown = set(fields) - {*need, "mc", "lamport", "two_shot_push", "two_shot_push_mc"}
        if unknown:
            raise self.fail(f"{h.type.name} field(s) {sorted(unknown)} are not understood", line)
        ordered: list[Rule | None] = []
        if "lamport" in fields:
            ordered.append(self.range_rule("2shot_lamport", h.get("lamport"), line))
        if "two_shot_push" in fields:
            # two_shot_push_mc only picks the multicast flavour inside this range
            ordered.append(self.range_rule("2shot_push", h.get("two_shot_push"), line))
        ordered += [
            upto("1shot_push", _floor(h.get(need[0]), line, self)),
            upto("1shot_pull", _floor(h.get(need[1]), line, self)),
            self.range_rule("2shot_pull_mc", h.get("mc"), line) if "mc" in fields else None,
            upto("2shot_pull", _floor(h.get(need[2]), line, self)),
        ]
        return tuple(rule for rule in ordered if rule is not None)

    def row_rules(self, rows: Any, line: int) -> tuple[Rule, ...]:
        """Shape C ``(max_bytes, (algo, multicast))`` tuples or shape D ``Row`` records, first match wins."""
        if not isinstance(rows, (tuple, list)):
            raise self.fail(f"expected a tuple of rows, got {_short(rows)}", line)
        out: list[Rule] = []
        for row in rows:
            if isinstance(row, Record) and {"algo", "max_bytes"} <= set(row.type.fields):
                algo, hi = row.get("algo"), row.get("max_bytes")
                multicast, lo = bool(row.get("multicast", False)), row.get("min_bytes", 0)
            elif isinstance(row, tuple) and len(row) == 2 and isinstance(row[1], tuple) and len(row[1]) == 2:
                hi, (algo, multicast), lo = row[0], row[1], 0
            else:
                raise self.fail(f"row {_short(row)} is neither (max_bytes, algo) nor a Row", line)
            name = _ALGOS.get(str(algo).rsplit(".", 1)[-1])
            if name is None:
                raise self.fail(f"algorithm {algo} is not one of {sorted(_ALGOS)}", line)
            if multicast:
                name = "2shot_pull_mc" if name == "2shot_pull" else name
            out.append(Rule(name, max(0, math.ceil(_number(lo, line, self))), _floor(hi, line, self)))
        return tuple(out)

    def tuning_rules(self, raw: Any, line: int) -> tuple[Rule, ...]:
        """Shape E ``(push, pull1, pull2[, (mc_min, mc_max)])``: SGLang's default band policy."""
        if not isinstance(raw, tuple) or len(raw) not in (3, 4):
            raise self.fail(f"expected (push, pull1, pull2[, (mc_min, mc_max)]), got {_short(raw)}", line)
        push, pull1, pull2 = (int(_number(v, line, self)) for v in raw[:3])
        if not push <= pull1 <= pull2:
            raise self.fail(f"tuning {raw} breaks SGLang's assert push <= pull1 <= pull2", line)
        plain = [(push, "1shot_push"), (pull1, "1shot_pull"), (pull2, "2shot_pull")]
        if len(raw) == 3:
            return _policy(plain)
        lo, hi = (int(_number(v, line, self)) for v in raw[3])
        with_mc = [*plain[:2], (lo - 1, "2shot_pull"), (hi, "2shot_pull_mc"), plain[2]]
        # without multicast SGLang recompiles the tuning without the mc bands: their rules follow
        return tuple(dict.fromkeys([*_policy(with_mc), *_policy(plain)]))

    # -------------------------------------------------------- configs

    def config(self, cfg: Any, fallback_line: int) -> ArchConfig:
        if isinstance(cfg, Record):
            line = _row_line(cfg, fallback_line)
            graph, eager = cfg.get("graph"), cfg.get("eager")
            if not eager:
                eager = graph  # SGLang: ``eager or graph``
            if "two_shot_pull_threshold" in ((getattr(graph, "type", None) and graph.type.fields) or ()):
                rules: Callable[[Any, int], tuple[Rule, ...]] = self.heuristic_rules
            elif isinstance(graph, tuple) and graph and isinstance(graph[0], (int, float)):
                rules = self.tuning_rules
            else:
                rules = self.row_rules
            blocks = [cfg.get(name) for name in ("num_push_blocks", "num_pull_blocks", "num_mc_blocks")]
            if blocks[2] is None and "num_multicast_blocks" in cfg.type.fields:
                blocks[2] = cfg.get("num_multicast_blocks")
            return ArchConfig(rules(graph, line), rules(eager, line), *map(_value, blocks), line)
        raise self.fail(f"expected an AllReduceConfig, got {_short(cfg)}", fallback_line)

    def configs_for(self, cap: tuple[int, int], num_sm: int | None) -> dict[int, ArchConfig] | None:
        """World size -> config for one probed arch; ``None`` when the file has no dispatch for it."""
        interp = self.interp(cap, num_sm)
        found = interp.globals.values
        if "THRESHOLD_2_SHOT_MAP" in found:
            return self._threshold_map(interp)
        dispatch = [name for name, value in found.items() if _is_dispatch(value)]
        if dispatch:
            return self._dispatch(interp, dispatch[0])
        raise self.fail(
            "no function here asks torch.cuda.get_device_capability() and none of THRESHOLD_2_SHOT_MAP, "
            "_smXY_configs or _smXY_tunings is defined: not a shape artune knows"
        )

    def _dispatch(self, interp: Interpreter, name: str) -> dict[int, ArchConfig]:
        func = interp.globals.values[name]
        params = [a.arg for a in func.node.args.args]
        line = func.node.lineno
        out: dict[int, ArchConfig] = {}
        if not params:
            result = interp.call(func, [], {})
            if not isinstance(result, dict):
                raise self.fail(f"{name}() returned {_short(result)}, not a dict of world size -> config", line)
            for ws, cfg in result.items():
                out[ws] = self.config(cfg, line)
            return out
        for ws in range(2, 17):  # shape A: one call per world size, a missing one raises KeyError
            try:
                cfg = interp.call(func, [ws], {})
            except Raised as err:
                if err.kind == "KeyError":
                    continue
                raise
            if cfg is not None:
                out[ws] = self.config(cfg, line)
        return out

    def _threshold_map(self, interp: Interpreter) -> dict[int, ArchConfig]:
        init = interp.globals.values.get("_maybe_init_config")
        if init is not None:
            interp.call(init, [], {})
        table = interp.globals.values["THRESHOLD_2_SHOT_MAP"]
        line = interp.lines.get("THRESHOLD_2_SHOT_MAP", 0)
        max_pull = 16 * MB  # max_pull_size default; should_custom_ar: n <= max(max_pull, max_push)
        out: dict[int, ArchConfig] = {}
        for ws, mode in table.items():
            push = _floor(mode.get("one_shot_push_threshold"), line, self)
            pull = _floor(mode.get("one_shot_pull_threshold"), line, self)
            top = max(max_pull, push)
            rules = (upto("1shot_push", push), upto("1shot_pull", min(pull, top)), upto("2shot_pull", top))
            out[ws] = ArchConfig(rules, rules, "sms", "sms", None, line)
        return out

    def has_tunings(self) -> bool:
        return any(_TUNINGS.match(name) for name in self.names)

    def tunings(self) -> tuple[dict[str, dict[int, ArchConfig]], dict[int, ArchConfig]]:
        """Shape E: ``_smXY_tunings(num_sm)`` per arch (the dispatch is elsewhere), ``_default_tunings``."""
        sms = {f"{cap[0]}.{cap[1]}": num_sm for cap, num_sm in PROBES}
        found: dict[str, dict[int, ArchConfig]] = {}
        default: dict[int, ArchConfig] = {}
        for name in sorted(self.names):
            match = _TUNINGS.match(name)
            if match is None and name != "_default_tunings":
                continue
            arch = f"{match.group(1)[:-1]}.{match.group(1)[-1]}" if match else "default"
            interp = self.interp((0, 0), sms.get(arch))
            func = interp.globals.values[name]
            sm = sms.get(arch)
            result = interp.call(func, [sm if sm is not None else Symbol("sms")], {})
            if not isinstance(result, dict):
                raise self.fail(f"{name}() returned {_short(result)}, not a dict", func.node.lineno)
            configs = {ws: self.config(raw, func.node.lineno) for ws, raw in result.items()}
            if match:
                found[arch] = configs
            else:
                default = configs
        return found, default

    def multinode(self, interp: Interpreter) -> dict[tuple[int, int], tuple[Any, int]]:
        bands = interp.globals.values.get("_MULTINODE_PUSH_BANDS")
        if bands is None:
            return {}
        if not isinstance(bands, dict):
            raise self.fail("_MULTINODE_PUSH_BANDS is not a dict of (major, world size) -> bands")
        return {key: (value, interp.lines.get("_MULTINODE_PUSH_BANDS", 0)) for key, value in bands.items()}


def _row_line(record: Record, fallback: int) -> int:
    # lines[0] is the dispatch function's call into the arch function; the next is the row's own call
    return record.lines[1] if len(record.lines) > 1 else record.lines[0] if record.lines else fallback


def _is_dispatch(value: Any) -> bool:
    return isinstance(value, Function) and "get_device_capability" in ast.unparse(value.node)


def _top_names(text: str, path: str) -> set[str]:
    try:
        tree = ast.parse(text, path)
    except SyntaxError as err:
        raise TableError(f"{path}:{err.lineno}: not valid Python: {err.msg}") from None
    return {getattr(node, "name", "") for node in tree.body}


def _number(value: Any, line: int, shape: _Shape) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise shape.fail(f"expected a byte count, got {_short(value)}", line)
    return value


def _floor(value: Any, line: int, shape: _Shape) -> int:
    return max(-1, math.floor(_number(value, line, shape)))


def _pair(value: Any, line: int, shape: _Shape) -> tuple[float, float]:
    if not isinstance(value, (tuple, Record)) or len(value) != 2:
        raise shape.fail(f"expected a Range(min_bytes, max_bytes), got {_short(value)}", line)
    return _number(value[0], line, shape), _number(value[1], line, shape)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) < 80 else text[:77] + "..."


# ------------------------------------------------------------------ tables


def _params(rules: tuple[Rule, ...], cfg: ArchConfig) -> dict[str, dict[str, ParamValue]]:
    grid = {
        "2shot_push": cfg.push,
        "1shot_push": cfg.push,
        "1shot_pull": cfg.pull,
        "2shot_pull": cfg.pull,
        "2shot_pull_mc": cfg.mc,
    }
    used = dict.fromkeys(rule.algorithm for rule in rules)
    return {name: {"blocks": grid[name]} for name in used if grid.get(name) is not None}


def _plans(configs: dict[int, ArchConfig]) -> tuple[Plan, ...]:
    plans = []
    for ws, cfg in sorted(configs.items()):
        for mode, rules in (("graph", cfg.graph), ("eager", cfg.eager)):
            bands = bands_from_rules(rules, FALLBACK)
            live = tuple(r for r in rules if any(r.algorithm in b.candidates for b in bands))
            plans.append(Plan(ws, mode, bands, FALLBACK, freeze_params(_params(live, cfg))))
    return tuple(plans)


def _rows(configs: dict[int, ArchConfig]) -> dict[int, tuple[Any, ...]]:
    return {ws: (c.graph, c.eager, c.push, c.pull, c.mc) for ws, c in configs.items()}


def build(source: SourceFile) -> EngineImport:
    """The tables and findings of one SGLang configs file."""
    shape = _Shape(source)
    origin = f"sglang:{source.label}"
    found, default = shape.tunings() if shape.has_tunings() else _probe(shape)
    if not found and not default:
        raise shape.fail("no world size has a config for any arch")
    notes = f"SGLang custom all-reduce v2 configs read from {describe([source])}"
    tables = {
        arch: Table(
            Platform("cuda", arch),
            Provenance("published", tool="sglang", notes=f"{notes}; arch {arch}"),
            _plans(c),
            origin=origin,
        )
        for arch, c in found.items()
    }
    interp = shape.interp((10, 0), 148)
    multinode: dict[str, dict[int, ArchConfig]] = {}
    for (major, ws), (bands, line) in shape.multinode(interp).items():
        arch = next((a for a in found if a.startswith(f"{major}.")), None)
        if arch is None or ws not in found[arch]:
            continue
        configs = multinode.setdefault(arch, dict(found[arch]))
        cfg = configs[ws]
        configs[ws] = ArchConfig(cfg.graph, _multinode_eager(shape, cfg, bands, line), cfg.push, cfg.pull, cfg.mc, line)
    for arch, configs in multinode.items():
        tables[f"{arch}/multinode"] = Table(
            Platform("cuda", arch, "multinode"),
            Provenance("published", tool="sglang", notes=f"{notes}; arch {arch} across nodes (_MULTINODE_PUSH_BANDS)"),
            _plans(configs),
            origin=origin,
        )
    default_table = None
    if default:
        default_table = Table(
            Platform("cuda", "default"),
            Provenance("published", tool="sglang", notes=f"{notes}; SGLang's default for other archs"),
            _plans(default),
            origin=origin,
        )
    sink = FindingSink(origin)
    _findings(source, found, default, sink)
    return EngineImport(
        "sglang", TableSet(origin, "cuda", MappingProxyType(tables), default_table), sink.done(), (source,)
    )


def _policy(bands: list[tuple[int, str]]) -> tuple[Rule, ...]:
    """SGLang's ``Band.normalize_list`` (strictly increasing bounds only), then first match."""
    kept: list[tuple[int, str]] = []
    for bound, name in bands:
        if bound >= 0 and (not kept or bound > kept[-1][0]):
            kept.append((bound, name))
    return tuple(upto(name, bound) for bound, name in kept)


def _probe(shape: _Shape) -> tuple[dict[str, dict[int, ArchConfig]], dict[int, ArchConfig]]:
    """Ask the file's own dispatch for every probed arch; keep the answers that differ."""
    found: dict[str, dict[int, ArchConfig]] = {}
    default = shape.configs_for(*DEFAULT_PROBE) or {}
    for cap, num_sm in PROBES:
        configs = shape.configs_for(cap, num_sm)
        if not configs:
            continue
        # the default answered with this arch's SM count: equal means the arch has no table of its own
        if _rows(configs) == _rows(shape.configs_for(DEFAULT_PROBE[0], num_sm) or {}):
            continue
        if any(_rows(configs) == _rows(other) for other in found.values()):
            continue  # the same table as an arch already read (10.3 runs SM100's): the family chain finds it
        found[f"{cap[0]}.{cap[1]}"] = configs
    return found, default


def _multinode_eager(shape: _Shape, cfg: ArchConfig, bands: Any, line: int) -> tuple[Rule, ...]:
    push = shape.range_rule("2shot_push", bands.get("two_shot_push") if isinstance(bands, Record) else None, line)
    rest = tuple(r for r in cfg.eager if r.algorithm != "2shot_push")
    return (push, *rest) if push is not None else rest


def _findings(
    source: SourceFile, found: dict[str, dict[int, ArchConfig]], default: dict[int, ArchConfig], sink: FindingSink
) -> None:
    where = lambda line: f"{source.path}:{line}"  # noqa: E731
    rows = {"configs": {arch: _rows(c) for arch, c in found.items()}}
    for arch, parent, equal, total in copied_archs(rows):
        first = min(found[arch].values(), key=lambda c: c.line)
        sink.add(where(first.line), arch, f"{arch} = {parent} in {equal} of {total} tables: measured, or inherited?")
    everything = {**found, "default": default}
    for arch, configs in everything.items():
        if not configs:
            continue
        sizes = sorted(configs)
        holes = [ws for ws in range(2, sizes[-1] + 1) if ws not in configs]
        if holes:
            sink.add(
                where(min(c.line for c in configs.values())),
                arch,
                f"world sizes {', '.join(map(str, holes))} have no config: custom all-reduce v2 is disabled "
                "there and every size goes to nccl",
            )
        for ws, cfg in sorted(configs.items()):
            for mode, rules in (("graph", cfg.graph), ("eager", cfg.eager)):
                sink.rules(where(cfg.line), arch, ws, mode, rules)
                if any(rule.hi > WORKSPACE for rule in rules):
                    sink.grouped(
                        where(cfg.line),
                        arch,
                        f"bounds above {format_size(WORKSPACE)} are clipped to it by SGLang's default workspace "
                        "(SGLANG_CUSTOM_ALL_REDUCE_V2_MAX_SIZE_KB): nccl runs above it",
                        ws,
                        mode,
                    )


def read_sglang(path: str) -> EngineImport:
    """SGLang's v2 configs from a checkout or the configs file itself."""
    _base, found = find_files(path, FILES, "SGLang")
    return build(read_source(found[0]))
