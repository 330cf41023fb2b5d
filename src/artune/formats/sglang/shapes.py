"""SGLang's custom all-reduce v2 configs file, in each of its shapes, read into one ``ArchConfig`` per world size.

SGLang's configs are code: helper calls, ``_config_builder`` closures,
lambdas, one function per arch taking the SM count, a dispatch on
``torch.cuda.get_device_capability()``. Two ways to read them were weighed:
running the module in a child process with SGLang's imports stubbed and
``torch.cuda`` faked, or interpreting the restricted subset the configs are
written in. **This reader interprets** (``artune.formats.pyeval``): nothing
from the checkout is executed, so importing a pull request's file is as
safe as reading it; the cost is that a construct outside the subset is an
error (exit 2) naming the file, line and construct, never a guess.
``torch.cuda`` is faked inside the evaluator only: ``get_device_capability``
answers each probed arch and
``get_device_properties(..).multi_processor_count`` the SM count (132 for
9.x, as tuned on H200; 148 for 10.x before 10.7, as tuned on B200; the
symbol ``sms`` elsewhere, kept in the parameters as ``"sms"``).

Shapes (the file layouts SGLang's releases have used): THRESHOLD_2_SHOT_MAP (2.0), one
builder per world size with ``Heuristic`` tuples (A, A' with ``lamport``),
one function per arch with ``two_shot_push`` and multinode push bands (B),
``(max_bytes, algo)`` tuple rows (C), ``Row`` helpers (D) and the split
``config/`` tuning package (E). The meaning of positional slots comes from
the ``Heuristic`` field order in the same file. Thresholds compare ``<=``
with SGLang's float values (``2.438 * MB`` admits 2556428 bytes), ranges are
inclusive both ends.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from artune.errors import Raised, TableError
from artune.formats.engine import short
from artune.formats.files import SourceFile
from artune.formats.pyeval import Function, Interpreter, Record, Symbol, parse
from artune.formats.sglang.caveats import Caveats
from artune.formats.sglang.rules import DEFAULT_PROBE, PROBES
from artune.table.priority import SizeRule, upto
from artune.table.types import ParamValue

MB = 1024 * 1024
_TUNINGS = re.compile(r"^_sm(\d{2,3})_tunings$")
_ALGOS = {
    "ONE_SHOT_PUSH": "1shot_push",
    "ONE_SHOT_PULL": "1shot_pull",
    "TWO_SHOT_PULL": "2shot_pull",
    "TWO_SHOT_PUSH": "2shot_push",
}
_HEURISTIC = ("one_shot_push_threshold", "one_shot_pull_threshold", "two_shot_pull_threshold")

Configs = dict[int, "ArchConfig"]  # world size -> config


@dataclass(frozen=True)
class ArchConfig:
    """One (arch, world size): rules per mode, block counts, the file line of its row."""

    graph: tuple[SizeRule, ...]
    eager: tuple[SizeRule, ...]
    push: ParamValue | None
    pull: ParamValue | None
    mc: ParamValue | None
    line: int

    @property
    def row(self) -> tuple[Any, ...]:
        """Everything but the line: two configs with equal rows decide alike."""
        return (self.graph, self.eager, self.push, self.pull, self.mc)


def rows(configs: Configs) -> dict[int, tuple[Any, ...]]:
    """World size -> ``ArchConfig.row``: what ``copied_archs`` and the probe compare."""
    return {ws: c.row for ws, c in configs.items()}


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


def _policy(bands: list[tuple[int, str]]) -> tuple[SizeRule, ...]:
    """SGLang's ``Band.normalize_list`` (strictly increasing bounds only), then first match."""
    kept: list[tuple[int, str]] = []
    for bound, name in bands:
        if bound >= 0 and (not kept or bound > kept[-1][0]):
            kept.append((bound, name))
    return tuple(upto(name, bound) for bound, name in kept)


def _row_line(record: Record, fallback: int) -> int:
    # lines[0] is the dispatch function's call into the arch function; the next is the row's own call
    return record.lines[1] if len(record.lines) > 1 else record.lines[0] if record.lines else fallback


def _is_world_size(value: Any) -> bool:
    return type(value) is int and value > 0


def _is_dispatch(value: Any) -> bool:
    return isinstance(value, Function) and "get_device_capability" in ast.unparse(value.node)


class Shape:
    """One SGLang configs file: its configs per probed arch, whichever shape it is written in."""

    def __init__(self, source: SourceFile) -> None:
        self.source = source
        self.names = {getattr(node, "name", "") for node in parse(source.text, source.path).body}
        self.range_needs_positive = "max_bytes > 0" in source.text or "max_bytes>0" in source.text
        self.caveats = Caveats()  # what the file holds that the evaluator stepped over

    def interp(self, cap: tuple[int, int], num_sm: int | None) -> Interpreter:
        """The file's top level run with ``torch.cuda`` answering ``cap`` and ``num_sm``; a construct the
        evaluator cannot follow is stepped over and kept as a caveat."""
        interp = Interpreter(self.source.text, self.source.path, fakes=_fakes(cap, num_sm))
        interp.unmodelled = lambda met: self.caveats.unmodelled(met, None)
        interp.run_module()
        return interp

    def fail(self, message: str, line: int | None = None) -> TableError:
        """An error naming the file, and the line when the fault has one (and what the evaluator stepped over,
        which may be why)."""
        where = self.source.path if line is None else f"{self.source.path}:{line}"
        stepped = "; ".join(c.describe() for c in self.caveats.caveats(()))
        return TableError(f"{where}: {message}" + (f" (artune could not evaluate: {stepped})" if stepped else ""))

    # values -> numbers

    def number(self, value: Any, line: int) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.fail(f"expected a byte count, got {short(value)}", line)
        return value

    def floor(self, value: Any, line: int) -> int:
        return max(-1, math.floor(self.number(value, line)))

    def blocks(self, value: Any, line: int) -> ParamValue | None:
        if value is None or isinstance(value, (int, float, str, bool)):
            return value
        if isinstance(value, Symbol):
            return str(value)
        raise self.fail(f"block count {short(value)} is not a number (num_push_blocks, num_pull_blocks, ...)", line)

    # rows -> rules

    def range_rule(self, algorithm: str, value: Any, line: int) -> SizeRule | None:
        """A ``Range(min_bytes, max_bytes)`` as an inclusive rule; ``None`` for SGLang's empty range."""
        if not isinstance(value, (tuple, Record)) or len(value) != 2:
            raise self.fail(f"expected a Range(min_bytes, max_bytes), got {short(value)}", line)
        lo, hi = self.number(value[0], line), self.number(value[1], line)
        if hi <= 0 and (self.range_needs_positive or hi < 0):
            return None
        return SizeRule(algorithm, max(0, math.ceil(lo)), math.floor(hi))

    def heuristic_rules(self, h: Any, line: int) -> tuple[SizeRule, ...]:
        """Shapes A, A' and B: a ``Heuristic`` of thresholds and ranges, in SGLang's order of preference."""
        if not isinstance(h, Record):
            raise self.fail(f"expected a Heuristic, got {short(h)}", line)
        fields = h.type.fields
        if not all(f in fields for f in _HEURISTIC):
            raise self.fail(f"{h.type.name} has fields {list(fields)}, not SGLang's Heuristic ones", line)
        unknown = set(fields) - {*_HEURISTIC, "mc", "lamport", "two_shot_push", "two_shot_push_mc"}
        if unknown:
            raise self.fail(
                f"{h.type.name} field(s) {sorted(unknown)} are not understood without SGLang's dispatch, which "
                "orders them: give the checkout or the release (artune then reads CustomAllReduceV2's dispatch in "
                "custom_all_reduce_v2.py beside configs/), not the configs file alone",
                line,
            )
        ordered: list[SizeRule | None] = []
        if "lamport" in fields:
            ordered.append(self.range_rule("2shot_lamport", h.get("lamport"), line))
        if "two_shot_push" in fields:
            # two_shot_push_mc only picks the multicast flavour inside this range
            ordered.append(self.range_rule("2shot_push", h.get("two_shot_push"), line))
        ordered += [
            upto("1shot_push", self.floor(h.get(_HEURISTIC[0]), line)),
            upto("1shot_pull", self.floor(h.get(_HEURISTIC[1]), line)),
            self.range_rule("2shot_pull_mc", h.get("mc"), line) if "mc" in fields else None,
            upto("2shot_pull", self.floor(h.get(_HEURISTIC[2]), line)),
        ]
        return tuple(rule for rule in ordered if rule is not None)

    def row_rules(self, rows: Any, line: int) -> tuple[SizeRule, ...]:
        """Shape C ``(max_bytes, (algo, multicast))`` tuples or shape D ``Row`` records, first match wins."""
        if not isinstance(rows, (tuple, list)):
            raise self.fail(f"expected a tuple of rows, got {short(rows)}", line)
        out: list[SizeRule] = []
        for row in rows:
            if isinstance(row, Record) and {"algo", "max_bytes"} <= set(row.type.fields):
                algo, hi = row.get("algo"), row.get("max_bytes")
                multicast, lo = bool(row.get("multicast", False)), row.get("min_bytes", 0)
            elif isinstance(row, tuple) and len(row) == 2 and isinstance(row[1], tuple) and len(row[1]) == 2:
                hi, (algo, multicast), lo = row[0], row[1], 0
            else:
                raise self.fail(f"row {short(row)} is neither (max_bytes, algo) nor a Row", line)
            name = _ALGOS.get(str(algo).rsplit(".", 1)[-1])
            if name is None:
                raise self.fail(f"algorithm {algo} is not one of {sorted(_ALGOS)}", line)
            if multicast:
                name = "2shot_pull_mc" if name == "2shot_pull" else name
            out.append(SizeRule(name, max(0, math.ceil(self.number(lo, line))), self.floor(hi, line)))
        return tuple(out)

    def tuning_rules(self, raw: Any, line: int) -> tuple[SizeRule, ...]:
        """Shape E ``(push, pull1, pull2[, (mc_min, mc_max)])``: SGLang's default band policy."""
        if not isinstance(raw, tuple) or len(raw) not in (3, 4):
            raise self.fail(f"expected (push, pull1, pull2[, (mc_min, mc_max)]), got {short(raw)}", line)
        push, pull1, pull2 = (int(self.number(v, line)) for v in raw[:3])
        if not push <= pull1 <= pull2:
            raise self.fail(f"tuning {raw} breaks SGLang's assert push <= pull1 <= pull2", line)
        plain = [(push, "1shot_push"), (pull1, "1shot_pull"), (pull2, "2shot_pull")]
        if len(raw) == 3:
            return _policy(plain)
        lo, hi = (int(self.number(v, line)) for v in raw[3])
        with_mc = [*plain[:2], (lo - 1, "2shot_pull"), (hi, "2shot_pull_mc"), plain[2]]
        # without multicast SGLang recompiles the tuning without the mc bands: their rules follow
        return tuple(dict.fromkeys([*_policy(with_mc), *_policy(plain)]))

    # configs

    def config(self, cfg: Any, fallback_line: int) -> ArchConfig:
        """One ``AllReduceConfig`` record, whichever kind of rows its ``graph`` and ``eager`` hold."""
        if not isinstance(cfg, Record):
            raise self.fail(f"expected an AllReduceConfig, got {short(cfg)}", fallback_line)
        line = _row_line(cfg, fallback_line)
        graph, eager = cfg.get("graph"), cfg.get("eager")
        if not eager:
            eager = graph  # SGLang: ``eager or graph``
        if isinstance(graph, Record) and "two_shot_pull_threshold" in graph.type.fields:
            rules: Callable[[Any, int], tuple[SizeRule, ...]] = self.heuristic_rules
        elif isinstance(graph, tuple) and graph and isinstance(graph[0], (int, float)):
            rules = self.tuning_rules
        else:
            rules = self.row_rules
        blocks = [cfg.get(name) for name in ("num_push_blocks", "num_pull_blocks", "num_mc_blocks")]
        if blocks[2] is None and "num_multicast_blocks" in cfg.type.fields:
            blocks[2] = cfg.get("num_multicast_blocks")
        push, pull, mc = (self.blocks(value, line) for value in blocks)
        return ArchConfig(rules(graph, line), rules(eager, line), push, pull, mc, line)

    def configs(self, result: Any, name: str, line: int) -> Configs:
        """What a function returned, as world size -> config; an error naming it when it is not that."""
        if not isinstance(result, dict) or not all(_is_world_size(ws) for ws in result):
            raise self.fail(f"{name}() returned {short(result)}, not a dict of world size -> config", line)
        return {ws: self.config(cfg, line) for ws, cfg in result.items()}

    def configs_for(self, cap: tuple[int, int], num_sm: int | None) -> Configs:
        """World size -> config for one probed arch (empty when the file has none for it)."""
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

    def _dispatch(self, interp: Interpreter, name: str) -> Configs:
        func = interp.globals.values[name]
        line = func.node.lineno
        if not func.node.args.args:
            return self.configs(interp.call(func, [], {}), name, line)
        out: Configs = {}
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

    def _threshold_map(self, interp: Interpreter) -> Configs:
        init = interp.globals.values.get("_maybe_init_config")
        if init is not None:
            interp.call(init, [], {})
        table = interp.globals.values["THRESHOLD_2_SHOT_MAP"]
        line = interp.lines.get("THRESHOLD_2_SHOT_MAP", 0)
        if not isinstance(table, dict) or not all(
            _is_world_size(ws) and isinstance(mode, (dict, Record)) for ws, mode in table.items()
        ):
            raise self.fail(
                f"THRESHOLD_2_SHOT_MAP is {short(table)}, not {{world size: {{'one_shot_push_threshold': bytes, "
                "'one_shot_pull_threshold': bytes}}",
                line,
            )
        max_pull = 16 * MB  # max_pull_size default; should_custom_ar: n <= max(max_pull, max_push)
        out: Configs = {}
        for ws, mode in table.items():
            push = self.floor(mode.get("one_shot_push_threshold"), line)
            pull = self.floor(mode.get("one_shot_pull_threshold"), line)
            top = max(max_pull, push)
            rules = (upto("1shot_push", push), upto("1shot_pull", min(pull, top)), upto("2shot_pull", top))
            out[ws] = ArchConfig(rules, rules, "sms", "sms", None, line)
        return out

    @property
    def is_tunings(self) -> bool:
        """Shape E: ``_smXY_tunings`` per arch, dispatched elsewhere."""
        return any(_TUNINGS.match(name) for name in self.names)

    def tunings(self) -> tuple[dict[str, Configs], Configs]:
        """Shape E: ``_smXY_tunings(num_sm)`` per arch (the dispatch is elsewhere), ``_default_tunings``."""
        sms = {f"{cap[0]}.{cap[1]}": num_sm for cap, num_sm in PROBES}
        found: dict[str, Configs] = {}
        default: Configs = {}
        for name in sorted(self.names):
            match = _TUNINGS.match(name)
            if match is None and name != "_default_tunings":
                continue
            arch = f"{match.group(1)[:-1]}.{match.group(1)[-1]}" if match else "default"
            sm = sms.get(arch)
            interp = self.interp((0, 0), sm)
            func = interp.globals.values[name]
            result = interp.call(func, [sm if sm is not None else Symbol("sms")], {})
            configs = self.configs(result, name, func.node.lineno)
            if match:
                found[arch] = configs
            else:
                default = configs
        return found, default

    def probe(self) -> tuple[dict[str, Configs], Configs]:
        """Arch -> configs (each arch whose answer differs) and the default, whichever shape the file is."""
        if self.is_tunings:
            return self.tunings()
        found: dict[str, Configs] = {}
        default = self.configs_for(*DEFAULT_PROBE)
        for cap, num_sm in PROBES:
            configs = self.configs_for(cap, num_sm)
            if not configs:
                continue
            # the default answered with this arch's SM count: equal means the arch has no table of its own
            if rows(configs) == rows(self.configs_for(DEFAULT_PROBE[0], num_sm)):
                continue
            if any(rows(configs) == rows(other) for other in found.values()):
                continue  # the same table as an arch already read (10.3 runs SM100's): the family chain finds it
            found[f"{cap[0]}.{cap[1]}"] = configs
        return found, default

    def multinode(self) -> dict[tuple[int, int], tuple[Any, int]]:
        """``_MULTINODE_PUSH_BANDS``: (major, world size) -> (bands, line); empty when the file has none."""
        interp = self.interp((10, 0), 148)
        bands = interp.globals.values.get("_MULTINODE_PUSH_BANDS")
        if bands is None:
            return {}
        line = interp.lines.get("_MULTINODE_PUSH_BANDS", 0)
        pair = lambda key: isinstance(key, tuple) and len(key) == 2 and all(_is_world_size(k) for k in key)  # noqa: E731
        if not isinstance(bands, dict) or not all(pair(key) for key in bands):
            raise self.fail("_MULTINODE_PUSH_BANDS is not a dict of (major, world size) -> bands", line)
        return {key: (value, line) for key, value in bands.items()}
