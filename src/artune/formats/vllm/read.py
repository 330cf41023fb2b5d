"""Read vLLM's all-reduce dispatch from a checkout or a release (``artune import vllm PATH``, ``vllm==0.33.0``).

A release's dispatch is read by its own code: ``artune.formats.vllm.code``
evaluates its communicators on every machine a table describes
(``artune.formats.vllm.dispatch``), and the tables hold what that code
decides. vLLM's rules as artune describes them (``artune.formats.vllm.rules``),
fitted to the code, add each plan's rows as written and why they differ, and
the reviewers' findings (``artune.formats.vllm.checks``). Given only the
table files (no ``cuda_communicator.py``), there is no dispatch to evaluate:
the tables are read as the rules of the newest release artune verified run
them, and the tables' provenance says so.

Whatever the evaluator cannot follow in the engine's own files is a caveat
on the tables it could touch (``Table.caveats``: ``check`` prints E401, the
function, file and line, what was met and what artune assumed), never an
exit; so is a dispatch function whose fingerprint no verified release has
(E402, ``artune.formats.fingerprints``). A file that is not vLLM's at all is
an error naming it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from artune import catalog, rocm
from artune.errors import ReleaseUnavailable, TableError
from artune.formats import fingerprints
from artune.formats.engine import EngineImport
from artune.formats.files import SourceFile, describe, find_files, present, read_source
from artune.formats.pyeval.values import ClassValue
from artune.formats.releases import fetch_release
from artune.formats.vllm.checks import reader_findings, row_tables
from artune.formats.vllm.code import CUDA, FILES, Decisions, Met, ReleaseCode
from artune.formats.vllm.dispatch import Evaluation, explained, fit, order
from artune.formats.vllm.figures import CUSTOM_AR_FILE, UTILS, Figures, read_figures
from artune.formats.vllm.rack import rack_plans
from artune.formats.vllm.reference import DISPATCH, RELEASE
from artune.formats.vllm.rocm_checks import rocm_findings
from artune.formats.vllm.rules import Dispatch, default_path, planned_archs, table_set
from artune.table.check import Finding, copied_archs
from artune.table.family import TableSet
from artune.table.types import Caveat, CaveatKind, Plan, Platform, Provenance, Table

CUSTOM_AR_WORLD_SIZES = (2, 4, 6, 8)  # vLLM's _SUPPORTED_WORLD_SIZES where its file is not read
#: the release whose rules a reading of the tables alone assumes: the reference's (``reference:vllm``), verified
NEWEST = RELEASE
#: the switches of the newest releases read (0.29-0.34), assumed where a checkout's envs.py is not given
NEWEST_DEFAULTS = {
    "VLLM_ALLREDUCE_USE_SYMM_MEM": True,
    "VLLM_ALLREDUCE_USE_FLASHINFER": True,
    "VLLM_FLASHINFER_ALLREDUCE_BACKEND": "auto",
}
#: paths that are off by default on CUDA, which the rules do not describe (the code's reading evaluates them)
UNPLANNED = {
    "VLLM_USE_NCCL_SYMM_MEM": "NCCL symmetric memory",
    "VLLM_ALLREDUCE_USE_FLASHINFER_PCIE_IPC": "FlashInfer's PCIe IPC all-reduce",
    "VLLM_BATCH_INVARIANT": "batch-invariant mode",
}
_READINGS: dict[tuple[Any, ...], tuple[EngineImport, ReleaseCode]] = {}  # each source read once per process
_KEEP = 16
_ROCM_READINGS: dict[tuple[Any, ...], EngineImport] = {}


def release_name(files: list[SourceFile]) -> str:
    """``vLLM 0.33.0`` for a cached release's files, ``vllm:PATH`` otherwise."""
    head = files[0].path.split("/", 1)[0]
    return f"vLLM {head.partition('==')[2]}" if head.startswith("vllm==") else f"vllm:{files[0].label}"


def _describe(files: list[SourceFile]) -> str:
    """The files read, as ``describe`` says it; a release's as ``vllm==0.33.0: a.py, b.py``."""
    heads = {f.path.split("/", 1)[0] for f in files}
    if len(heads) == 1 and next(iter(heads)).startswith("vllm=="):
        return f"{next(iter(heads))}: {', '.join(f.path.rsplit('/', 1)[-1] for f in files)}"
    return describe(files)


# ------------------------------------------------------------------ the rules' facts


def _seed(figures: Figures, release: ReleaseCode | None, name: str) -> tuple[Dispatch, list[str], list[Caveat]]:
    """vLLM's rules for ``figures``: the reference release's facts (``reference.DISPATCH``), with what the
    files give (the environment's defaults, custom all-reduce's buffer and world sizes); what was assumed; and
    the caveats of a default that cannot be computed or of a switch the rules do not describe."""
    assumed: list[str] = []
    caveats: list[Caveat] = []
    env: dict[str, Any] = dict(NEWEST_DEFAULTS)
    if release is None or "vllm.envs" not in release.modules:
        assumed.append(f"envs.py not read: {NEWEST}'s defaults (symmetric memory and FlashInfer's all-reduce on)")
    else:
        for variable in (*NEWEST_DEFAULTS, *UNPLANNED):
            status, value = release.env(variable)
            if status == "value":
                env[variable] = value
            elif status == "absent":
                env[variable] = None  # the release has no such switch: that path is not there
            else:
                caveats.append(
                    Caveat(
                        CaveatKind.UNEVALUATED,
                        f"envs.{variable}",
                        release.sources["vllm.envs"].path,
                        f"its default cannot be computed: {value}",
                        f"{NEWEST}'s default, {NEWEST_DEFAULTS.get(variable, False)!r}",
                    )
                )
    custom = _custom_ar_class(release)
    sizes = tuple(custom.attributes.get("_SUPPORTED_WORLD_SIZES", ())) if custom else ()
    if not sizes:
        sizes = DISPATCH.custom_ar_world_sizes
        assumed.append("custom_all_reduce.py not read: CustomAllreduce's 8 MiB default at world sizes 2, 4, 6, 8")
    d = replace(
        DISPATCH,
        release=name,
        custom_ar=figures.custom_ar or {},
        symm_mem=figures.symm_mem,
        multimem=figures.multimem,
        fi_sizes_mb=figures.fi_fusion or {},
        fi_tuned_mb=figures.fi_mnnvl or {},
        custom_ar_max=_max_size(release, custom) or DISPATCH.custom_ar_max,
        custom_ar_world_sizes=tuple(int(ws) for ws in sizes),
        custom_ar_ws_limit=8,
        symm_mem_on=bool(env.get("VLLM_ALLREDUCE_USE_SYMM_MEM")),
        flashinfer_on=bool(env.get("VLLM_ALLREDUCE_USE_FLASHINFER")),
        fi_tuned_on=env.get("VLLM_FLASHINFER_ALLREDUCE_BACKEND") in ("auto", "mnnvl"),
    )
    complete = release is not None and release.complete
    for variable, what in UNPLANNED.items():
        if env.get(variable) and not complete:
            caveats.append(
                Caveat(
                    CaveatKind.UNEVALUATED,
                    f"envs.{variable}",
                    "envs.py",
                    f"defaults to on, so {what} runs by default, and cuda_communicator.py (which decides when) "
                    "is not among the files read",
                    f"{what} takes no message (vLLM's rules as artune describes them have no such path)",
                )
            )
    return d, assumed, caveats


def _custom_ar_class(release: ReleaseCode | None) -> ClassValue | None:
    found = release.globals(CUDA.rpartition(".")[0] + ".custom_all_reduce").get("CustomAllreduce") if release else None
    return found if isinstance(found, ClassValue) else None


def _max_size(release: ReleaseCode | None, custom: ClassValue | None) -> int | None:
    """``CustomAllreduce.__init__``'s ``max_size`` default, evaluated (its buffer where no row applies)."""
    init = custom.methods.get("__init__") if custom is not None else None
    if release is None or init is None:
        return None
    spec = init.node.args
    positional = [*spec.posonlyargs, *spec.args]
    defaults = dict(
        zip([a.arg for a in positional[len(positional) - len(spec.defaults) :]], spec.defaults, strict=True)
    )
    node = defaults.get("max_size")
    interp = release.modules[CUDA.rpartition(".")[0] + ".custom_all_reduce"]
    try:
        value = interp.eval(node, init.defaults_scope or init.scope) if node is not None else None
    except TableError:
        return None
    return value if type(value) is int else None


# ------------------------------------------------------------------ caveats


def _caveats(met: list[Met], figures: Figures) -> list[Caveat]:
    """A caveat for each place the evaluator could not follow, and each table it could not compute."""
    out = []
    for item in met:
        what = item.what
        sizes = () if None in item.machines else tuple(sorted({m.world_size for m in item.machines if m}))
        out.append(
            Caveat(
                CaveatKind.UNEVALUATED,
                what.function or f"{what.filename.rsplit('/', 1)[-1]} (module level)",
                f"{what.filename}:{what.line}",
                f"{what.construct}: {what.reason}",
                what.assumed,
                sizes,
            )
        )
    for unread in figures.unread:
        out.append(
            Caveat(
                CaveatKind.UNEVALUATED,
                unread.name,
                unread.where,
                unread.why,
                f"there is no {unread.name} (its rows are not read, and the code that reads it is told so)",
            )
        )
    return out


def _unknown_kernels(names: set[str], arch: str) -> list[Caveat]:
    return [
        Caveat(
            CaveatKind.UNEVALUATED,
            "CudaCommunicator.all_reduce",
            "cuda_communicator.py",
            f"launches {name}, which artune's catalog has no name for (on arch {arch})",
            "the sizes it takes go to nccl",
        )
        for name in sorted(names)
    ]


# ------------------------------------------------------------------ reading


def build_rules(
    figures: Figures, files: list[SourceFile], release: ReleaseCode | None = None, caveats: tuple[Caveat, ...] = ()
) -> EngineImport:
    """``figures`` read as vLLM's rules run them (no dispatch code among ``files``, or rows artune wrote)."""
    name = release_name(files)
    d, assumed, more = _seed(figures, release, name)
    if release is not None and figures.custom_ar is not None and not release.complete:
        assumed.append(f"cuda_communicator.py not read: the dispatch of {NEWEST} (reference:vllm)")
    every = (*caveats, *more)
    return _tables(figures, files, d, assumed, lambda arch, plans: plans, every, lambda arch: every)


def _tables(
    figures: Figures,
    files: list[SourceFile],
    d: Dispatch,
    assumed: list[str],
    plans_of: Any,
    caveats: tuple[Caveat, ...],
    caveats_of: Any,
    findings: tuple[Finding, ...] = (),
    dtype: str = "",
) -> EngineImport:
    """The tables of ``d`` (each arch's plans passed through ``plans_of``), their provenance and findings;
    ``dtype``: the messages' dtype the code was evaluated with ("" where no code was)."""
    origin = f"vllm:{files[0].label}"
    copies = {arch: (parent, equal, total) for arch, parent, equal, total in copied_archs(row_tables(figures))}
    read = _describe(files)
    runs = f"what {d.release} runs by default" + (f" for {dtype} messages" if dtype not in ("", "bfloat16") else "")
    extra = f"; {'; '.join(assumed)}" if assumed else ""

    def provenance(arch: str) -> Provenance:
        if arch in copies:
            parent, equal, total = copies[arch]
            return Provenance(
                source="inherited",
                inherited_from=parent,
                tool="vllm",
                notes=f"vLLM's {arch} rows equal {parent}'s in {equal} of {total} tables; {runs} ({read}){extra}",
            )
        return Provenance(source="published", tool="vllm", notes=f"{runs} on {arch} ({read}){extra}")

    default = Provenance(
        source="published",
        tool="vllm",
        notes=f"{runs} on an arch missing from its tables: {default_path(d)} ({read}){extra}",
    )
    base = table_set(d, origin, provenance, default, across_hosts=rack_plans)
    tables = {
        arch: replace(table, plans=plans_of(arch, table.plans), caveats=caveats_of(arch), dtype=dtype)
        for arch, table in base.tables.items()
    }
    assert base.default is not None
    fallback = replace(
        base.default, plans=plans_of("default", base.default.plans), caveats=caveats_of("default"), dtype=dtype
    )

    def engine_arch(arch: str) -> Table:
        table = base.engine_arch(arch) if base.engine_arch is not None else fallback
        assert table is not None
        return replace(table, plans=plans_of(arch, table.plans), caveats=caveats_of(arch), dtype=dtype)

    found = (*reader_findings(figures, d, origin, files[0].path), *findings)
    tableset = TableSet(base.name, "cuda", MappingProxyType(tables), fallback, rules="vllm", engine_arch=engine_arch)
    return EngineImport("vllm", tableset, found, tuple(files))


def build(
    files: list[SourceFile],
    settings: Mapping[str, str] | None = None,
    dtype: str = "bfloat16",
    assume_true: frozenset[tuple[str, int]] = frozenset(),
) -> tuple[EngineImport, ReleaseCode]:
    """vLLM's tables from ``files`` read by their own code (where the dispatch is among them) for messages of
    ``dtype``, and the evaluated release; ``assume_true``: the ``(file, line)`` of ``if`` tests the evaluator
    cannot know, taken as true (their other outcome) instead of false."""
    release = ReleaseCode(files, settings, dtype=dtype, assume_true=assume_true)
    figures = read_figures(release)
    met_caveats = tuple(_caveats(list(release.met.values()), figures))
    if not release.complete:
        return build_rules(figures, files, release, met_caveats), release
    name = release_name(files)
    evaluation = Evaluation(release, figures)
    seed, assumed, _none = _seed(figures, release, name)
    archs = [*planned_archs(replace(seed, symm_mem_on=True, flashinfer_on=True)), "default"]
    seed = replace(seed, order=order(evaluation, archs) or seed.order)
    d, unexplained = fit(seed, evaluation, archs)
    unfamiliar = tuple(fingerprints.unfamiliar("vllm", release.evaluated()))
    if unfamiliar:
        unfamiliar = _against_nearest(unfamiliar, release, evaluation, archs, settings, dtype)

    def plans_of(arch: str, modelled: tuple[Any, ...]) -> tuple[Any, ...]:
        rules = {(p.world_size, p.mode, p.multicast, p.hosts, p.nvlink): p for p in modelled}
        return tuple(
            explained(p, rules.get((p.world_size, p.mode, p.multicast, p.hosts, p.nvlink)))
            for p in evaluation.arch(arch).plans
        )

    def caveats_of(arch: str) -> tuple[Caveat, ...]:
        met = _caveats(evaluation.met(arch), figures)
        unread = [c for c in met_caveats if c.function in {u.name for u in figures.unread}]
        return (*met, *unread, *_unknown_kernels(evaluation.arch(arch).unknown, arch), *unfamiliar)

    raised = _raised(evaluation, archs, name, f"vllm:{files[0].label}")
    notes = (
        *raised,
        *_unexplained(unexplained, d, files[0].path),
        *_unverified(name, release, unfamiliar, files[0].path),
    )
    imported = _tables(figures, files, d, assumed, plans_of, met_caveats, caveats_of, notes, dtype)
    if raised:  # the evaluated raise is the finding: the rules' account of the same place would say it twice
        said = {(arch, f.world_size) for f in raised for arch in f.arch.split(", ")}
        kept = [f for f in imported.findings if f.code != "E202" or (f.arch, f.world_size) not in said]
        # the rules' holes (E201) say nccl runs there; where the code raises instead, E203 is the answer
        instead = {f.world_size for f in raised if f.world_size is not None}
        sizes = _sizes(instead)
        kept = [
            replace(
                f,
                message=f"{f.message}; except at world sizes {sizes}, where vLLM raises instead (E203)",
                world_sizes=tuple(sorted({*f.world_sizes, *instead})),
            )
            if f.code == "E201"
            else f
            for f in kept
        ]
        imported = replace(imported, findings=tuple(kept))
    return _with_rocm(imported, evaluation, caveats_of, settings), release


def _with_rocm(
    imported: EngineImport, evaluation: Evaluation, caveats_of: Any, settings: Mapping[str, str] | None
) -> EngineImport:
    """``imported`` whose set answers an AMD gfx arch with the table vLLM's code runs on ROCm there
    (``_rocm_set``), every other arch as before."""
    tables = imported.tables
    cuda_arch = tables.engine_arch
    amd = _rocm_set(list(imported.files), evaluation, caveats_of, settings)

    def engine_arch(arch: str) -> Table | None:
        if rocm.is_gfx(arch):
            return amd.tables.resolve(arch)
        return cuda_arch(arch) if cuda_arch is not None else None

    return replace(
        imported, tables=replace(tables, engine_arch=engine_arch), findings=(*imported.findings, *amd.findings)
    )


def _rocm_set(
    files: list[SourceFile], evaluation: Evaluation, caveats_of: Any, settings: Mapping[str, str] | None
) -> EngineImport:
    """The ``rocm`` tables of one reading: for each gfx arch asked (or the capability torch reports for one),
    what the release's code runs on a ROCm machine of that arch under ``settings``, read by ``evaluation``;
    and the findings on what the code does on each AMD arch artune has facts for (``rocm_findings``)."""
    name = release_name(files)
    under = ", ".join(f"{k}={v}" for k, v in sorted((settings or {}).items())) or "no VLLM_* variable set"
    origin = f"vllm:{files[0].label}"
    made: dict[str, Table] = {}

    def engine_arch(arch: str) -> Table:
        if arch not in made:
            notes = f"what {name} runs on ROCm {rocm.describe(arch)} under {under} ({_describe(files)})"
            made[arch] = Table(
                Platform(rocm.KIND, arch),
                Provenance(source="published", tool="vllm", notes=notes),
                tuple(evaluation.arch(arch).plans),
                rules="vllm",
                origin=origin,
                caveats=tuple(caveats_of(arch)),
                dtype=evaluation.release.dtype,
            )
        return made[arch]

    tables = TableSet(origin, rocm.KIND, MappingProxyType({}), None, rules="vllm", engine_arch=engine_arch)
    found = rocm_findings(evaluation, files, settings)
    return EngineImport("vllm", tables, found, tuple(files))


def rocm_tables(path: str, settings: Mapping[str, str] | None = None, dtype: str = "bfloat16") -> EngineImport:
    """vLLM's ``rocm`` tables and their findings from ``path``, read by its own code under ``settings`` (its
    ``VLLM_*`` variables) for messages of ``dtype``, without reading its CUDA tables: what
    ``read_vllm(path, settings, dtype)`` answers for a gfx arch."""
    files = _files(path)
    key = ("rocm", *_key(path, files, settings), dtype)
    if key not in _ROCM_READINGS:
        release = ReleaseCode(files, settings, dtype=dtype)
        if not release.complete:
            raise TableError(f"{path}: cuda_communicator.py is not among the files read; no ROCm dispatch to read")
        figures = read_figures(release)
        evaluation = Evaluation(release, figures)
        _ROCM_READINGS[key] = _rocm_set(
            files, evaluation, lambda arch: _caveats(evaluation.met(arch), figures), settings
        )
    return _ROCM_READINGS[key]


def _raised(evaluation: Evaluation, archs: list[str], name: str, table: str) -> tuple[Finding, ...]:
    """E202 where the release's own code raises on one host: one finding per world size and place (its arches
    listed), naming what it raises, its file and line, and whether vLLM fails at start-up or on its first
    all-reduce (with the machines, multicast on or off, and the mode, where only some raise)."""
    engine = name if name.startswith("vLLM ") else "vLLM"
    found: dict[tuple[int, str, bool | None, str | None], list[str]] = {}
    outcomes: dict[tuple[int, str, bool | None, str | None], Decisions] = {}
    for arch in archs:
        by_size: dict[int, list[tuple[bool, str, Decisions]]] = {}
        for (ws, multicast, mode), outcome in evaluation.arch(arch).raised.items():
            by_size.setdefault(ws, []).append((multicast, mode, outcome))
        for ws, seen in by_size.items():
            multicasts = {m for m, _mode, _o in seen}
            modes = {mode for _m, mode, _o in seen}
            key = (
                ws,
                seen[0][2].raised,
                next(iter(multicasts)) if len(multicasts) == 1 else None,
                next(iter(modes)) if len(modes) == 1 else None,
            )
            found.setdefault(key, []).append(arch)
            outcomes[key] = seen[0][2]
    out = []
    for key in sorted(found, key=lambda k: (k[0], k[1], str(k[2]), str(k[3]))):
        ws, _raised, multicast, mode = key
        outcome = outcomes[key]
        where, what = outcome.where, outcome.raises
        place = where.rsplit("/", 1)[-1] if where else "its dispatch"
        when = "it fails at start-up" if outcome.at_start else "its first all-reduce fails"
        only = [f"with NVLink multicast {'on' if multicast else 'off'}"] if multicast is not None else []
        only += [f"in {mode} mode"] if mode is not None else []
        out.append(
            Finding(
                table,
                ", ".join(found[key]),
                f"{engine} raises {outcome.kind or 'an error'} at world size {ws} ({place}: {what}): "
                f"{when}" + (f" ({', '.join(only)} only)" if only else ""),
                ws,
                mode,
                source=where,
                severity="error",
                multicast=multicast,
                code="E203",
                world_sizes=(ws,),
                args=(outcome.kind, what, when, *only),
            )
        )
    return tuple(out)


_COMPARING: set[str] = set()  # the nearest releases being read to compare with (their reading never compares)


def _nearest(release: ReleaseCode) -> str:
    """The verified release that shares the most of ``release``'s evaluated fingerprints (ties: the newest)."""
    verified = fingerprints.load_verified("vllm")
    shared: dict[str, int] = {}
    for item in release.evaluated():
        for kept in verified.get(item.function, {}).get(item.fingerprint, ()):
            shared[kept] = shared.get(kept, 0) + 1
    return max(shared, key=lambda r: (shared[r], fingerprints.version_key(r)), default="")


def _against_nearest(
    unfamiliar: tuple[Caveat, ...],
    release: ReleaseCode,
    evaluation: Evaluation,
    archs: list[str],
    settings: Mapping[str, str] | None,
    dtype: str,
) -> tuple[Caveat, ...]:
    """``unfamiliar`` (E402) with the decisions that differ from the nearest verified release's, both evaluated
    for ``dtype`` under ``settings``: each arch and plan whose bands differ, and each world size where one of
    them raises and the other does not."""
    nearest = _nearest(release)
    if not nearest or nearest in _COMPARING:
        return unfamiliar
    try:
        root = fetch_release("vllm", nearest)
    except ReleaseUnavailable as err:
        said = f"; its decisions are not compared with vLLM {nearest}'s, which cannot be had: {err}"
        return tuple(replace(c, detail=c.detail + said) for c in unfamiliar)
    _COMPARING.add(nearest)
    try:
        theirs = read_vllm(str(root), settings, dtype)
    finally:
        _COMPARING.discard(nearest)
    differ: list[str] = []
    for arch in archs:
        mine = {p.key: p.bands for p in evaluation.arch(arch).plans}
        table = theirs.tables.tables.get(arch) or theirs.tables.resolve(arch)
        other = {p.key: p.bands for p in table.plans}
        raised = {ws for ws, _m, _mode in evaluation.arch(arch).raised}
        raised_there = {f.world_size for f in theirs.findings if f.code == "E203" and arch in f.arch.split(", ")}
        keys = {k for k in mine.keys() | other.keys() if mine.get(k) != other.get(k)}
        one = {k[0] for k in keys if k[2] == 1} | (raised ^ raised_there)
        across = {k[0] for k in keys if k[2] > 1}
        if one or across:
            where = [f"ws {_sizes(one)} on one host"] if one else []
            where += [f"ws {_sizes(across)} across hosts"] if across else []
            differ.append(f"{arch} {' and '.join(where)}")
    if not differ:
        said = f"; every decision read is vLLM {nearest}'s (both evaluated)"
    else:
        said = f"; the decisions differ from vLLM {nearest}'s (both evaluated) at {'; '.join(differ)}"
    return tuple(replace(c, detail=c.detail + said) for c in unfamiliar)


def _sizes(world_sizes: set[int]) -> str:
    """``3, 5, 9-16``: world sizes in order, runs joined."""
    runs: list[list[int]] = []
    for ws in sorted(world_sizes):
        if runs and ws == runs[-1][-1] + 1:
            runs[-1].append(ws)
        else:
            runs.append([ws])
    return ", ".join(str(r[0]) if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs)


#: the dtypes besides bf16 that vLLM's paths tell apart (symmetric memory takes bf16 only; the others fp16, bf16
#: and fp32), each read by the code as bf16 is: ``check`` says where they decide otherwise
OTHER_DTYPES = ("float16", "float32")


def dtype_findings(path: str, settings: Mapping[str, str] | None = None) -> tuple[Finding, ...]:
    """The reading of ``path`` for each of ``OTHER_DTYPES``, against the bf16 reading's tables: where the code
    raises only for that dtype (E203), and a note (V120) naming the plans where it decides otherwise than the
    bf16 tables do with the catalog's dtype conditions (what a bf16 table, exported or diffed, holds)."""
    base = read_vllm(path, settings)
    if not any(t.dtype for t in base.tables.tables.values()):
        return ()  # no dispatch code read: nothing evaluated for any dtype
    raised = {(f.arch, f.world_size) for f in base.findings if f.code == "E203"}
    out: list[Finding] = []
    for dtype in OTHER_DTYPES:
        other = read_vllm(path, settings, dtype)
        out += [
            replace(f, message=f"{f.message} (for {dtype} messages)", args=(*f.args, dtype))
            for f in other.findings
            if f.code == "E203" and (f.arch, f.world_size) not in raised
        ]
        moved = sorted(
            {
                f"{arch} {plan.topology}"
                for arch, table in other.tables.tables.items()
                for plan in table.plans
                if _firsts(plan, None) != _firsts(base.tables.tables[arch].plan(*_at(plan)), dtype)
            }
        )
        if moved:
            first = next(iter(base.tables.tables.values())).origin
            out.append(
                Finding(
                    first,
                    "*",
                    f"for {dtype} messages vLLM's code decides otherwise than its bfloat16 tables (with artune's "
                    f"dtype conditions) at {', '.join(moved[:8])}{' ...' if len(moved) > 8 else ''}: "
                    f"`artune explain --dtype {dtype}` reads what it runs there; a table exported or diffed holds "
                    "bfloat16's",
                    severity="note",
                    code="V120",
                    args=(dtype, *moved),
                )
            )
    return tuple(out)


def _at(plan: Plan) -> tuple[Any, ...]:
    return (plan.world_size, plan.mode, plan.hosts, plan.multicast, plan.nvlink)


def _firsts(plan: Plan | None, dtype: str | None) -> list[tuple[int | None, str]]:
    """What ``plan`` runs, band by band, for messages of ``dtype`` (``None``: as it stands): each band's first
    candidate the catalog's dtype conditions admit, equal neighbours merged."""
    if plan is None:
        return []
    ruled_out = catalog.unavailable(plan.world_size, dtype, 0, True, plan.hosts) if dtype else {}
    out: list[tuple[int | None, str]] = []
    for band in plan.bands:
        first = next((c for c in band.candidates if c not in ruled_out), plan.fallback)
        if out and out[-1][1] == first:
            out[-1] = (band.upto, first)
        else:
            out.append((band.upto, first))
    while out and out[-1][1] == plan.fallback and out[-1][0] is not None:
        out.pop()
    return out


def _unverified(name: str, release: ReleaseCode, unfamiliar: tuple[Caveat, ...], first: str) -> tuple[Finding, ...]:
    """A note for a release artune never verified (``vllm==X`` for an X no ``verify-engine --record`` kept) whose
    dispatch functions all match a verified release's (where one differs, its E402 says so)."""
    version = name.removeprefix("vLLM ")
    verified = fingerprints.load_verified("vllm")
    if not name.startswith("vLLM ") or unfamiliar or not verified:
        return ()
    shared: dict[str, int] = {}
    for item in release.evaluated():
        for kept in verified.get(item.function, {}).get(item.fingerprint, ()):
            shared[kept] = shared.get(kept, 0) + 1
    if version in shared:
        return ()
    nearest = max(shared, key=lambda r: (shared[r], fingerprints.version_key(r)), default="")
    return (
        Finding(
            f"vllm:{first}",
            "*",
            f"{name} is not among the releases artune verified against vLLM's own code (artune verify-engine "
            f"vllm=={version} --record keeps it); every dispatch function it evaluated matches "
            f"{'vLLM ' + nearest if nearest else 'a verified release'}'s",
            source=first,
            severity="note",
            code="V107",
        ),
    )


def _unexplained(keys: set[Any], d: Dispatch, first: str) -> tuple[Finding, ...]:
    """A note where vLLM's rules as artune describes them decide otherwise than the code (no rows as written,
    no notes there)."""
    places = sorted(
        {f"{k[0]} ws={k[1]}" + (f" hosts={k[4]}" if len(k) > 4 and k[4] > 1 else "") for k in keys if len(k) > 1}
    )
    if not places:
        return ()
    return (
        Finding(
            f"vllm:{first}",
            "*",
            f"{d.release}'s dispatch code decides otherwise than vLLM's rules as artune describes them at "
            f"{', '.join(places[:8])}{' ...' if len(places) > 8 else ''}: its plans there hold what the code runs, "
            "without rows as written or notes, and the findings about them are the rules'",
            source=first,
            severity="note",
            code="V106",
            args=tuple(places),
        ),
    )


def _key(path: str, files: list[SourceFile], settings: Mapping[str, str] | None) -> tuple[Any, ...]:
    digest = hashlib.sha256()
    for source in files:
        digest.update(source.path.encode() + b"\0" + source.text.encode() + b"\0")
    return (path, digest.hexdigest(), tuple(sorted((settings or {}).items())))


def _files(path: str) -> list[SourceFile]:
    base, found = find_files(path, FILES, "vLLM")
    if base.is_file():
        siblings = [base.parent / Path(rel).name for rel in FILES]
        found += [p for p in siblings if p.is_file() and p != base]
        return [read_source(p, root=p if p == base else base.parent) for p in found]  # its folder is the tree
    elif not present(base / UTILS) and not present(base / CUSTOM_AR_FILE):
        raise TableError(f"{path}: neither {UTILS} nor {CUSTOM_AR_FILE} is here; is this a vLLM checkout?")
    return [read_source(p, root=base) for p in found]


def reading(
    path: str,
    settings: Mapping[str, str] | None = None,
    dtype: str = "bfloat16",
    assume_true: frozenset[tuple[str, int]] = frozenset(),
) -> tuple[EngineImport, ReleaseCode]:
    """The reading of ``path`` for messages of ``dtype`` (with the tests ``assume_true`` names taken as true)
    and its evaluated release, once per content in this process."""
    files = _files(path)
    key = (*_key(path, files, settings), dtype, assume_true)
    if key not in _READINGS:
        if len(_READINGS) >= _KEEP:
            _READINGS.pop(next(iter(_READINGS)))
        _READINGS[key] = build(files, settings, dtype, assume_true)
    return _READINGS[key]


def read_vllm(path: str, settings: Mapping[str, str] | None = None, dtype: str = "bfloat16") -> EngineImport:
    """vLLM's tables from a checkout, a release folder or one of its files (``settings``: ``VLLM_*``
    variables set, as vLLM reads them), for messages of ``dtype`` (the code decides each dtype itself)."""
    return reading(path, settings, dtype)[0]


def evaluated(path: str, settings: Mapping[str, str] | None = None) -> list[fingerprints.Evaluated]:
    """The dispatch functions the reading of ``path`` evaluated, fingerprinted (what ``verify-engine --record``
    keeps once every probe agreed)."""
    return reading(path, settings)[1].evaluated()


__all__ = ["build", "build_rules", "evaluated", "read_vllm", "reading", "release_name", "rocm_tables"]
