"""Read SGLang's custom all-reduce from a checkout or a release (``artune import sglang PATH``, ``sglang:PATH``,
``sglang==0.5.23``).

Where the communicator (``custom_all_reduce_v2.py``) is there, as in every
checkout and released wheel, SGLang's own code says how it decides: which
class ``dispatch_custom_allreduce`` builds for a group (v2 or the legacy
``CustomAllreduce``, ``custom_all_reduce.py``), which world sizes it takes,
how ``CustomAllReduceV2.__init__`` sizes each config, and the order its
dispatch function tries the algorithms in (``artune.formats.sglang.release``,
``artune.formats.sglang.dispatch``, ``artune.formats.sglang.choice``); the
findings are ``artune.formats.sglang.checks``'. Both layouts are accepted: a
checkout's ``python/sglang/...`` and a wheel's ``sglang/...``.

A configs file on its own (a pull request's, or the shapes in
``artune.formats.sglang.configs`` that never shipped) has no dispatch beside
it: its rows are read in the order SGLang's ``Heuristic`` documents, every
bound clipped to the 16 MiB default workspace as ``__init__`` does, and a
field that order does not cover is refused. Multinode push bands
(``_MULTINODE_PUSH_BANDS``, keyed by major and world size) become the arch's
plans across hosts in one NVLink domain (``nvlink=rack``, every number of
hosts dividing the world size): the eager heuristic's push range replaced by
the band, as those configs replace it for a multi-node group, the graph row
as read.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from dataclasses import replace
from types import MappingProxyType
from typing import Any

from artune import rocm
from artune.errors import TableError
from artune.formats.engine import EngineImport, FindingSink
from artune.formats.files import SourceFile, describe, find_files, present, read_source
from artune.formats.fingerprints import Evaluated
from artune.formats.pyeval import Record
from artune.formats.sglang import hip
from artune.formats.sglang.checks import collect
from artune.formats.sglang.configs import ArchConfig, Configs, Shape, rows
from artune.formats.sglang.dispatch import CLASS, Files
from artune.formats.sglang.release import Release
from artune.formats.sglang.release import evaluated as release_evaluated
from artune.formats.sglang.rocm_tables import evaluated as rocm_tables_evaluated
from artune.formats.sglang.rocm_tables import rocm_set
from artune.formats.sglang.rules import env_defaults
from artune.formats.vllm.switches import Switch
from artune.sizes import format_size
from artune.table.check import copied_archs
from artune.table.family import TableSet
from artune.table.priority import SizeRule, bands_from_rules
from artune.table.types import NVLinkDomain, ParamValue, Plan, Platform, Provenance, Table, freeze_params

_DIR = "sglang/srt/distributed/device_communicators"
CONFIGS = f"{_DIR}/configs/custom_all_reduce_v2.py"
TUNING = f"{_DIR}/config/custom_all_reduce_v2_tuning.py"
COMMUNICATOR = f"{_DIR}/custom_all_reduce_v2.py"
DISPATCHER = f"{_DIR}/custom_all_reduce.py"
QUICK = f"{_DIR}/quick_all_reduce.py"
ENVIRON = "sglang/srt/environ.py"
LAYOUTS = ("python/", "")  # a checkout's, a wheel's
FILES = tuple(f"{prefix}{rel}" for prefix in LAYOUTS for rel in (CONFIGS, TUNING, COMMUNICATOR))
WORKSPACE = 16 * 1024 * 1024  # SGLANG_CUSTOM_ALL_REDUCE_V2_MAX_SIZE_KB default: 16 MiB
FALLBACK = "nccl"


def _params(rules: tuple[SizeRule, ...], cfg: ArchConfig) -> dict[str, dict[str, ParamValue]]:
    grid = {
        "2shot_push": cfg.push,
        "1shot_push": cfg.push,
        "1shot_pull": cfg.pull,
        "2shot_pull": cfg.pull,
        "2shot_pull_mc": cfg.mc,
    }
    used = dict.fromkeys(rule.algorithm for rule in rules)
    return {name: {"blocks": grid[name]} for name in used if grid.get(name) is not None}


_CLIP_NOTE = (
    f"SGLang's {format_size(WORKSPACE)} default workspace (SGLANG_CUSTOM_ALL_REDUCE_V2_MAX_SIZE_KB) clips every "
    "bound to it, as CustomAllReduceV2.__init__ does, and nccl runs above (no communicator beside this file: the "
    "clip is assumed, not read)"
)


def _clip(rule: SizeRule) -> SizeRule:
    """A bound as the default workspace leaves it: ``min(bound, 16 MiB)`` at both ends (``Range.clip``)."""
    return SizeRule(rule.algorithm, min(rule.lo, WORKSPACE), min(rule.hi, WORKSPACE))


def _plans(configs: Configs, rack: Provenance | None = None) -> tuple[Plan, ...]:
    """One plan per world size and mode; ``rack``: across hosts in one NVLink domain, with this provenance,
    for every number of hosts dividing the world size."""
    plans = []
    for ws, cfg in sorted(configs.items()):
        for mode, rules in (("graph", cfg.graph), ("eager", cfg.eager)):
            written = bands_from_rules(rules, FALLBACK)
            bands = bands_from_rules(tuple(_clip(r) for r in rules), FALLBACK)
            live = tuple(r for r in rules if any(r.algorithm in b.candidates for b in (*bands, *written)))
            clipped = bands != written
            plan = Plan(
                ws,
                mode,
                bands,
                FALLBACK,
                freeze_params(_params(live, cfg)),
                written=written if clipped else (),
                notes=(_CLIP_NOTE,) if clipped else (),
            )
            if rack is None:
                plans.append(plan)
            else:
                topology = {"provenance": rack, "nvlink": NVLinkDomain.RACK}
                plans += [replace(plan, hosts=h, **topology) for h in range(2, ws + 1) if ws % h == 0]
    return tuple(plans)


def _multinode(shape: Shape, found: dict[str, Configs]) -> dict[str, Configs]:
    """Arch -> configs across nodes, for the world sizes ``_MULTINODE_PUSH_BANDS`` names: its band replaces
    the eager push range."""
    out: dict[str, Configs] = {}
    for (major, ws), (bands, line) in shape.multinode().items():
        arch = next((a for a in found if a.startswith(f"{major}.")), None)
        if arch is None or ws not in found[arch]:
            continue
        configs = out.setdefault(arch, {})
        cfg = found[arch][ws]
        configs[ws] = ArchConfig(cfg.graph, _multinode_eager(shape, cfg, bands, line), cfg.push, cfg.pull, cfg.mc, line)
    return out


def _multinode_eager(shape: Shape, cfg: ArchConfig, bands: Any, line: int) -> tuple[SizeRule, ...]:
    push = shape.range_rule("2shot_push", bands.get("two_shot_push") if isinstance(bands, Record) else None, line)
    rest = tuple(r for r in cfg.eager if r.algorithm != "2shot_push")
    return (push, *rest) if push is not None else rest


def build(source: SourceFile) -> EngineImport:
    """The tables and findings of one SGLang configs file."""
    shape = Shape(source)
    origin = f"sglang:{source.label}"
    found, default = shape.probe()
    if not found and not default:
        raise shape.fail("no world size has a config for any arch")
    notes = f"SGLang custom all-reduce v2 configs read from {describe([source])}"

    multinode = _multinode(shape, found)

    def table(platform: Platform, configs: Configs, about: str) -> Table:
        provenance = Provenance("published", tool="sglang", notes=f"{notes}; {about}")
        plans = _plans(configs)
        if platform.arch in multinode:
            rack = Provenance(
                "published",
                tool="sglang",
                notes=f"{notes}; arch {platform.arch} across hosts in one NVLink domain: _MULTINODE_PUSH_BANDS "
                "replaces the eager heuristic's push range for a multi-node group",
            )
            plans += _plans(multinode[platform.arch], rack)
        return Table(platform, provenance, plans, rules="sglang", origin=origin, caveats=shape.caveats.caveats(()))

    tables = {arch: table(Platform("cuda", arch), c, f"arch {arch}") for arch, c in found.items()}
    default_table = table(Platform("cuda", "default"), default, "SGLang's default for other archs") if default else None
    sink = FindingSink(origin)
    sink.add(
        f"{source.path}:1",
        "all",
        f"no {CLASS} beside this configs file: its rows are read in the order SGLang's Heuristic documents, "
        "clipped to the default workspace (give the checkout or the release to read SGLang's own dispatch)",
        severity="note",
        code="S101",
    )
    _findings(source, found, default, sink)
    sglang_arch = _engine_arch(shape, found, tables, default_table, origin)
    table_set = TableSet(
        origin, "cuda", MappingProxyType(tables), default_table, rules="sglang", engine_arch=sglang_arch
    )
    return EngineImport("sglang", table_set, sink.done(), (source,))


def _engine_arch(
    shape: Shape, found: dict[str, Configs], tables: dict[str, Table], default: Table | None, origin: str
) -> Callable[[str], Table | None]:
    """What SGLang's dispatch in ``shape``'s file gives an arch with no table of its own: the table of the arch
    whose rows it gets (block counts, which follow the SM count, aside), or None for the default."""
    thresholds = {arch: {ws: (c.graph, c.eager) for ws, c in configs.items()} for arch, configs in found.items()}

    def engine_arch(arch: str) -> Table | None:
        major, dot, minor = arch.partition(".")
        if not (dot and major.isdigit() and minor.isdigit()) or shape.is_tunings:
            return None
        mine = {ws: (c.graph, c.eager) for ws, c in shape.configs_for((int(major), int(minor)), None).items()}
        twin = next((a for a, rows in thresholds.items() if rows == mine), None)
        if twin is None:
            return None
        note = f"arch {arch} has no configs of its own in {origin}; SGLang's dispatch gives it arch {twin}'s"
        return tables[twin].with_changes(borrowed=(note,))

    return engine_arch


def _findings(source: SourceFile, found: dict[str, Configs], default: Configs, sink: FindingSink) -> None:
    where = lambda line: f"{source.path}:{line}"  # noqa: E731
    for arch, parent, equal, total in copied_archs({"configs": {arch: rows(c) for arch, c in found.items()}}):
        first = min(found[arch].values(), key=lambda c: c.line)
        sink.copied(where(first.line), arch, parent, equal, total)
    for arch, configs in {**found, "default": default}.items():
        if not configs:
            continue
        holes = [ws for ws in range(2, max(configs) + 1) if ws not in configs]
        if holes:
            sink.add(
                where(min(c.line for c in configs.values())),
                arch,
                f"world sizes {', '.join(map(str, holes))} have no config: custom all-reduce v2 is disabled "
                "there and every size goes to nccl",
                code="E201",
                world_sizes=tuple(holes),
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
                        "E301",
                    )


def read_sglang(path: str, settings: Mapping[str, str] | None = None) -> EngineImport:
    """SGLang's custom all-reduce from a checkout, a release's unpacked wheel, or one of its files; ``settings``:
    environment variables set, as a user sets them (every other one at its default)."""
    found = _locate(path)
    if isinstance(found, Files):
        return build_release(found, settings or {})
    return build(found)


def build_release(files: Files, settings: Mapping[str, str]) -> EngineImport:
    """The tables and findings of SGLang as ``files`` (a release or a checkout) run it; ``settings``: environment
    variables set, as a user sets them."""
    release = Release(files, settings)
    findings = collect(release)
    sources = tuple(f for f in (files.configs, files.communicator, files.dispatcher) if f is not None)
    tables = release.table_set()
    amd = rocm_set(files, settings)
    cuda_arch = tables.engine_arch

    def engine_arch(arch: str) -> Table | None:
        # an AMD GPU: what the same files run with is_hip() true (artune.formats.sglang.rocm_tables)
        if rocm.is_gfx(arch):
            return amd.tables.resolve(arch)
        return cuda_arch(arch) if cuda_arch is not None else None

    return EngineImport("sglang", replace(tables, engine_arch=engine_arch), findings, sources)


def rocm_switches(path: str, settings: Mapping[str, str] | None = None) -> dict[str, Switch]:
    """The switches SGLang's HIP path reads (``artune.formats.sglang.hip.SWITCHES``) at ``path``, with ``settings``
    set and the rest at the release's defaults."""
    found = _locate(path)
    if not isinstance(found, Files):
        return {}
    env = env_defaults(found.environ, settings or {})
    return hip.switches((found.dispatcher, found.quick), env, settings or {})


def rocm_tables(path: str, settings: Mapping[str, str] | None = None) -> EngineImport:
    """SGLang's ``rocm`` tables from a release or checkout at ``path``, read by its own code under ``settings``
    (its ``SGLANG_*`` and ``ROCM_QUICK_REDUCE_*`` variables), without reading its CUDA tables."""
    found = _locate(path)
    if not isinstance(found, Files) or found.dispatcher is None:
        raise TableError(f"{path}: custom_all_reduce.py is not among the files read; no ROCm dispatch to read")
    return rocm_set(found, settings or {})


def evaluated(path: str, settings: Mapping[str, str] | None = None) -> list[Evaluated]:
    """The dispatch functions a reading of ``path`` relies on, fingerprinted (none for a configs file alone)."""
    found = _locate(path)
    return release_evaluated(found, settings or {}) if isinstance(found, Files) else []


def rocm_evaluated(path: str, settings: Mapping[str, str] | None = None) -> list[Evaluated]:
    """The dispatch functions the ``rocm`` readings of ``path`` under ``settings`` rely on, fingerprinted."""
    found = _locate(path)
    return rocm_tables_evaluated(found, settings or {}) if isinstance(found, Files) and found.dispatcher else []


def _locate(path: str) -> Files | SourceFile:
    """The communicator and the files beside it, or the one configs file to read alone."""
    base, found = find_files(path, FILES, "SGLang")
    if base.is_file():
        source = read_source(base)
        return Files(source) if f"class {CLASS}" in source.text else source
    for prefix in LAYOUTS:
        communicator = base / prefix / COMMUNICATOR
        if present(communicator):
            optional = [base / prefix / rel for rel in (CONFIGS, ENVIRON, DISPATCHER, QUICK)]
            configs, environ, dispatcher, quick = (read_source(p, root=base) if present(p) else None for p in optional)
            source = read_source(communicator, root=base)
            if f"class {CLASS}" in source.text:
                return Files(source, configs, environ, dispatcher, quick)
            return configs or source
    return read_source(found[0], root=base)


def switch_defaults(path: str) -> dict[str, Any]:
    """``SGLANG_...`` -> its default as the release at ``path`` computes it (``environ.py``), for the review's
    switch dimension; {} for a configs file read alone."""
    found = _locate(path)
    return env_defaults(found.environ) if isinstance(found, Files) else {}


def tested(path: str) -> tuple[tuple[tuple[str, str], ...], ...]:
    """Each setting of the switches SGLang's CUDA dispatch at ``path`` tests to a value other than its default:
    the variables its files read while the reading ran them (``envs.NAME``, ``get_bool_env_var``) that
    ``environ.py`` declares ``EnvBool`` (set as ``1`` and ``0``, the values that change what ``envs.NAME.get()``
    gives); a free value (a size) is no switch. One variable a setting, and then, under each, every value of a
    switch that only that setting makes the files read, with it (one level: the legacy class's switches under
    ``SGLANG_OPT_USE_CUSTOM_ALL_REDUCE_V2=0``). () without ``environ.py``."""
    found = _locate(path)
    if not isinstance(found, Files) or found.environ is None:
        return ()
    environ = found.environ
    declared = _bools(environ)

    def read(settings: Mapping[str, str]) -> set[str]:
        return {name for reading in Release(found, settings).readings for name in reading.variables} & declared

    def values(names: set[str], settings: Mapping[str, str]) -> list[tuple[str, str]]:
        defaults = env_defaults(environ, settings)
        return [
            (name, text)
            for name in sorted(names)
            for text in ("1", "0")
            if env_defaults(environ, {**settings, name: text})[name] != defaults[name]
        ]

    first = read({})
    out: list[tuple[tuple[str, str], ...]] = [(pair,) for pair in values(first, {})]
    for setting in list(out):
        out += [(*setting, pair) for pair in values(read(dict(setting)) - first, dict(setting))]
    return tuple(out)


def _bools(environ: SourceFile) -> set[str]:
    """The variables ``environ.py``'s ``Envs`` declares ``EnvBool(...)``."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(environ.text)):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            func = node.value.func
            if isinstance(func, ast.Name) and func.id == "EnvBool":
                out |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return out


def config_functions(path: str) -> list[Evaluated]:
    """The top-level functions of the release's configs file (``_sm107_configs``), fingerprinted: where each
    arch's rows are built, for the review to name the one that changed; [] without a configs file."""
    import ast

    from artune.formats.fingerprints import evaluated as record

    found = _locate(path)
    configs = found.configs if isinstance(found, Files) else found
    if configs is None:
        return []
    tree = ast.parse(configs.text)
    return [record(node.name, node, configs.path) for node in tree.body if isinstance(node, ast.FunctionDef)]
