"""``artune check``, ``explain`` and ``show``: look at tables without running anything."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table as RichTable
from rich.text import Text

from artune import catalog, rocm, settings
from artune.catalog import DTYPES, SPECS
from artune.cli import arch_option, error_text, exit_status
from artune.errors import ArtuneError
from artune.findings import parse_codes, selected
from artune.formats.references import reference_set
from artune.measure.records import DTYPE_BYTES
from artune.sizes import format_size, format_span, parse_size
from artune.sources import SOURCES, Source, open_source, open_tables, selected_source, source_findings
from artune.table.check import Finding, modelled_summary, raises_at
from artune.table.decide import Decision, decide
from artune.table.io import dumps_table, table_to_dict
from artune.table.overrides import apply_overrides, parse_overrides
from artune.table.selection import select_table
from artune.table.types import MODES, NVLINK_DOMAINS, CaveatKind, Plan, ShapePlan, Table, TokenShape


def register(commands: Any) -> None:
    """Add the table sub-commands to the parser."""
    # over 60 lines, and whole on purpose: one list of argparse declarations reads best as the --help it makes
    check = commands.add_parser(
        "check", help="lint tables (default: the one a Communicator here would use); exit 1 when anything is found"
    )
    check.add_argument("tables", nargs="*", metavar=SOURCES)
    check.add_argument(
        "--max-world-size",
        type=int,
        default=None,
        metavar="N",
        help="also require plans for every world size up to N",
    )
    check.add_argument(
        "--select", metavar="CODE,...", help="print only findings with these codes or prefixes (e.g. T,E101)"
    )
    check.add_argument("--ignore", metavar="CODE,...", help="leave out findings with these codes or prefixes")
    check.add_argument("--nvlink-domain", choices=NVLINK_DOMAINS, help=_DOMAIN_HELP)
    check.add_argument(
        "--evidence",
        metavar="FILE",
        help="an engine benchmark's output (vLLM, nccl-tests, SGLang, TensorRT-LLM): flag rows that lose to the "
        "best row the engine's knobs allow on it by more than its noise",
    )
    check.add_argument(
        "--arch", type=arch_option, help="the arch the evidence was measured on (required with --evidence)"
    )
    check.add_argument(
        "--evidence-world-size", type=int, metavar="N", help="for evidence files that do not print their world size"
    )
    check.add_argument("--evidence-mode", choices=MODES, help="for evidence files that do not record their mode")
    check.add_argument(
        "--output-format",
        "--format",
        dest="output_format",
        choices=OUTPUT_FORMATS,
        default="text",
        help="text (a line a finding), json (a list of findings), github (a workflow annotation per finding at "
        "its file and line, relative to the checkout), sarif (SARIF 2.1.0, for code scanning)",
    )
    check.set_defaults(run=run_check)

    explain = commands.add_parser("explain", help="which algorithm a table picks for one message, and why")
    source = explain.add_mutually_exclusive_group()
    source.add_argument(
        "--table",
        metavar="FILE|bundled:cpu|vllm:PATH|sglang:PATH",
        help="default: the table a Communicator here would use (ARTUNE_TABLE, this machine's measured table, "
        "then the bundled default)",
    )
    source.add_argument("--reference", metavar="NAME", help="an engine's published tables: vllm or sglang")
    explain.add_argument(
        "--arch",
        type=arch_option,
        help="architecture: a CUDA capability (10.7) or an AMD gfx arch (gfx942; a ROCm table set also reads the "
        "capability torch reports there, 9.4) (required with --reference)",
    )
    explain.add_argument("--world-size", type=int, required=True)
    explain.add_argument(
        "--hosts", type=int, default=1, help="how many hosts the ranks span (plans are per topology; default 1)"
    )
    explain.add_argument(
        "--nvlink-domain",
        choices=NVLINK_DOMAINS,
        help="across hosts: rack (every host in one NVLink domain, as in NVL72) or host (each host its own, the "
        "hosts joined over a network; the default where not given)",
    )
    explain.add_argument("--size", help="message size, e.g. 4096, 64KiB, 2.5MiB (or --tokens with --hidden)")
    explain.add_argument(
        "--tokens", type=int, help="tokens of the message (a table that decides by shape: TensorRT-LLM's)"
    )
    explain.add_argument("--hidden", type=int, help="hidden size: elements a token (with --tokens or --size)")
    explain.add_argument("--fusion", default="NONE", help="fused op, TensorRT-LLM's AllReduceFusionOp name (NONE)")
    explain.add_argument("--mode", choices=MODES, default="eager")
    explain.add_argument("--dtype", choices=DTYPES, help="default: float32 on a CPU table, bfloat16 on a GPU one")
    explain.add_argument(
        "--no-multicast", action="store_true", help="NVLink multicast not available (CUDA tables only)"
    )
    explain.add_argument("--algorithm", help="override: force this algorithm (wins over the table)")
    explain.add_argument(
        "--bound",
        action="append",
        default=[],
        metavar="NAME=SIZE",
        help="override: the band of NAME ends at SIZE (repeatable)",
    )
    explain.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="VAR=VALUE",
        help="decide under this engine setting (repeatable; vLLM's VLLM_* variables, e.g. "
        "VLLM_ROCM_QUICK_REDUCE_QUANTIZATION=INT8): the release's own code is read with it set",
    )
    explain.add_argument("--json", action="store_true", help="print the decision as one JSON object")
    explain.add_argument(
        "--as-written", action="store_true", help="an engine's rows as its file writes them, without its caps and clips"
    )
    explain.set_defaults(run=run_explain)

    show = commands.add_parser(
        "show", help="print tables as band charts, TOML or JSON (default: the one a Communicator here would use)"
    )
    show.add_argument("tables", nargs="*", metavar=SOURCES)
    show.add_argument("--format", choices=("chart", "toml", "json"), default="chart")
    show.add_argument(
        "--as-written", action="store_true", help="an engine's rows as its file writes them, without its caps and clips"
    )
    show.add_argument("--nvlink-domain", choices=NVLINK_DOMAINS, help=_DOMAIN_HELP)
    show.add_argument("--hidden", type=int, help="a shape table's plans for this hidden size's row only")
    show.add_argument("--fusion", help="a shape table's plans for this fused op only")
    show.set_defaults(run=run_show)


_DOMAIN_HELP = (
    "plans across hosts for one NVLink domain only: rack (every host in one domain, as in NVL72) or host (each "
    "host its own, joined over a network); single-host plans always"
)


def in_domain(table: Table, nvlink: str | None) -> Table:
    """``table`` with its plans across hosts for NVLink domain ``nvlink`` only (``None``: every plan)."""
    if nvlink is None:
        return table
    keep = tuple(p for p in table.plans if p.hosts == 1 or p.nvlink.value == nvlink)
    return table if keep == table.plans else table.with_changes(plans=keep)


def _label(table: Table) -> str:
    return f"{table.name} arch={table.platform.arch}"


# ------------------------------------------------------------------ check


OUTPUT_FORMATS = ("text", "json", "github", "sarif")


def run_check(args: argparse.Namespace) -> int:
    """Print the findings (``--select``/``--ignore`` by code) in ``--output-format``; 0 clean, 1 findings,
    2 unreadable, 3 a source that could only not be fetched (every unreadable one a ``SourceUnavailable``)."""
    select, ignore = parse_codes(args.select, "--select"), parse_codes(args.ignore, "--ignore")
    found = 0
    unreadable: list[int] = []
    evidence = _evidence(args)
    printed: list[Finding] = []
    for spec in args.tables or [None]:
        try:
            source = open_source(spec) if spec is not None else selected_source()
            if args.nvlink_domain is not None:
                source = replace(source, tables=[in_domain(t, args.nvlink_domain) for t in source.tables])
                source = replace(
                    source, findings=tuple(f for f in source.findings if _in_domain(f, args.nvlink_domain))
                )
            findings = source_findings(source, args.max_world_size)
            if evidence is not None:
                findings += _evidence_findings(source, evidence, args.arch)
        except ArtuneError as err:
            print(f"artune check: {error_text(err)}", file=sys.stderr)
            unreadable.append(exit_status(err))
            continue
        for finding in selected(findings, select, ignore):
            if args.output_format == "text":
                print(finding)
            printed.append(finding)
            found += not finding.note
    if args.output_format != "text":
        sys.stdout.write(_formatted(printed, args.output_format))
    if printed:
        print(counted(printed), file=sys.stderr)
    if unreadable:
        return min(unreadable)  # bad input outranks a source that could not be fetched
    return 1 if found else 0


def counted(findings: Sequence[Finding]) -> str:
    """How many findings of each severity, most severe first, the way linters close: ``4 warnings, 4 notes``
    (notes are printed but do not make the exit status 1)."""
    kinds = Counter(f.severity for f in findings)
    return ", ".join(f"{kinds[k]} {k}{'' if kinds[k] == 1 else 's'}" for k in ("error", "warning", "note") if kinds[k])


def _formatted(findings: list[Finding], output_format: str) -> str:
    """The findings as JSON (a list of objects), GitHub workflow annotations or SARIF."""
    from artune.review.annotations import checkout_path, github, question_of, sarif

    questions = [question_of(f) for f in findings]
    if output_format == "github":
        return github(questions)
    if output_format == "sarif":
        return json.dumps(sarif(questions), indent=1) + "\n"
    rows = []
    for finding, question in zip(findings, questions, strict=True):
        path, line = checkout_path(question.where)
        rows.append({**asdict(finding), "file": path or None, "line": line, "text": str(finding)})
    return json.dumps(rows, indent=1) + "\n"


def _in_domain(finding: Finding, nvlink: str) -> bool:
    """Whether an engine's finding is about one host or the NVLink domain asked for (its codes say: N101,
    N102 and N111 are about racks, N103 about hosts joined over a network)."""
    about = {"N101": "rack", "N102": "rack", "N111": "rack", "N103": "host"}.get(finding.code)
    return about is None or about == nvlink


def _evidence(args: argparse.Namespace) -> Any:
    """The sweep ``--evidence`` names (``None`` without it)."""
    if not args.evidence:
        return None
    if not args.arch:
        raise ArtuneError("check: --evidence needs --arch, the arch the sweep was measured on (e.g. --arch 10.3)")
    from artune.evidence import read_evidence

    return read_evidence(args.evidence, world_size=args.evidence_world_size, mode=args.evidence_mode, arch=args.arch)


def _evidence_findings(source: Source, evidence: Any, arch: str) -> list[Finding]:
    """``check --evidence``: the findings of the table ``source`` runs on ``arch``, scored on the sweep."""
    from artune.evidence.check import evidence_findings

    table = source.table_set.resolve(arch) if source.table_set is not None else source.tables[0]
    return evidence_findings(table, evidence, arch)


# ------------------------------------------------------------------ explain


def _resolve_for_explain(args: argparse.Namespace) -> Table:
    if args.reference:
        if not args.arch:
            raise ArtuneError("explain: --reference needs --arch, e.g. --arch 10.7")
        return _same_vendor(reference_set(args.reference).resolve(args.arch), args.arch, args.reference)
    if args.env or (args.dtype and args.arch and _reads_dtypes(args.table)):
        return _under_env(args)  # the engine's code read for the message's dtype (and --env's switches)
    source = open_source(args.table)
    if source.table_set is not None and len(source.tables) > 1:
        if not args.arch:
            raise ArtuneError(f"explain: {args.table} holds tables for several arches; give --arch, e.g. --arch 10.7")
        _refuse_where_it_raises(source.findings, args, source.table_set.tables)
        return _same_vendor(source.table_set.resolve(args.arch), args.arch, args.table)
    return source.tables[0]


def _reads_dtypes(table: str | None) -> bool:
    """Whether ``table`` is an engine's whose code decides per dtype (``explain --dtype`` reads it for one)."""
    from artune.formats import engine_reader
    from artune.formats.registry import READABLE

    engine = next((e for e in READABLE if table and table.startswith((f"{e}:", f"{e}=="))), None)
    return engine is not None and engine_reader(engine).dtype_findings is not None


def _engine_env(args: argparse.Namespace) -> tuple[str, dict[str, str]]:
    """``explain --env``: the source's folder (an engine's that reads under switches) and the variables set; an
    error naming the fix otherwise."""
    from artune.formats import engine_reader, engine_source
    from artune.formats.registry import engines

    found = engine_source(args.table) if args.table else None
    if found is None or engine_reader(found[0]).read_under is None:
        first, *others = engines("read_under")
        also = f" (or {' or '.join(e.label + chr(39) + 's' for e in others)})" if others else ""
        versions = ", ".join(f"{e.name}==VERSION" for e in (first, *others))
        raise ArtuneError(
            f"explain: --env sets a {first.label} release's switches{also}; give --table {versions} or ENGINE:PATH"
        )
    pairs = {}
    for item in args.env or ():
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise ArtuneError(f"explain: --env {item!r}: give VAR=VALUE, e.g. VLLM_ROCM_QUICK_REDUCE_QUANTIZATION=INT8")
        pairs[name] = value
    return found[1], pairs


def _under_env(args: argparse.Namespace) -> Table:
    """The table the engine's own code runs for ``--arch`` with ``--env``'s variables set (ROCm: its tables
    alone), read for ``--dtype``'s messages."""
    from artune.formats import engine_reader, engine_source

    if not args.arch:
        raise ArtuneError("explain: --env needs --arch, e.g. --arch gfx942")
    path, pairs = _engine_env(args)
    found = engine_source(args.table)
    assert found is not None  # _engine_env refused any other table
    read_under = engine_reader(found[0]).read_under
    assert read_under is not None
    reading = read_under(path, pairs, args.dtype or "bfloat16", args.arch)
    _refuse_where_it_raises(reading.findings, args, () if rocm.is_gfx(args.arch) else reading.tables.tables)
    return reading.tables.resolve(args.arch)


def _refuse_where_it_raises(findings: Any, args: argparse.Namespace, named: Any = ()) -> None:
    """An error where the engine raises at start-up on this AMD arch and world size (V110), or where its own
    code raises on one host of this arch (E203; ``named``: the arches its tables name, any other read as
    ``default``): no all-reduce runs."""
    if args.arch and not rocm.is_gfx(args.arch) and args.hosts == 1:
        arch = args.arch if args.arch in named else "default"
        found = raises_at(list(findings), arch, args.world_size, not args.no_multicast, args.mode)
        if found is not None:
            raise ArtuneError(
                f"explain: {found.message} ({found.source or found.table}); the engine does not run this all-reduce "
                "there, so no algorithm does"
            )
    gfx = rocm.gfx_arch(args.arch) if args.arch else None
    for found in findings:
        if found.code == "V110" and found.arch == gfx and args.hosts == 1 and args.world_size in found.world_sizes:
            raise ArtuneError(
                f"explain: {found.message} ({found.source or found.table}); the engine does not start there, so "
                "no all-reduce runs"
            )


def _rocm_switches(args: argparse.Namespace, table: Table, algorithm: str) -> list[str]:
    """For vLLM's ROCm table: each switch as the release reads it, and the one that decided ``algorithm``."""
    from artune.formats import engine_source
    from artune.formats.vllm.switches import decided_by, switches

    found = engine_source(args.table) if args.table else None
    if table.platform.kind != rocm.KIND or found is None:
        return []
    if found[0] == "sglang":
        from artune.formats.sglang import hip
        from artune.formats.sglang.read import rocm_switches

        values = rocm_switches(found[1], _engine_env(args)[1] if args.env else {})
        return [
            f"switches: {', '.join(str(v) for v in values.values())}",
            f"decided by: {hip.decided_by(algorithm, values)}",
        ]
    if found[0] != "vllm":
        return []
    values = switches(found[1], _engine_env(args)[1] if args.env else {})
    if not values:
        return []
    out = [f"switches: {', '.join(str(v) for v in values.values())}", f"decided by: {decided_by(algorithm, values)}"]
    cast = values.get("VLLM_ROCM_QUICK_REDUCE_CAST_BF16_TO_FP16")
    if table.dtype != (args.dtype or "bfloat16") and cast is not None and not cast.value:
        out.append(
            f"unverified: the reading asks vLLM with bfloat16 messages; with {cast} a {args.dtype} message reads "
            "QuickReduce's own _QR_MIN_SIZE row for its dtype, which this table does not hold"
        )
    return out


def _same_vendor(table: Table, arch: str, source: str) -> Table:
    """``table``, unless ``arch`` is an AMD gfx arch and the table is for another platform: a CUDA table's
    answer is not what runs on an AMD GPU, so it is refused rather than borrowed."""
    if rocm.is_gfx(arch) and table.platform.kind != rocm.KIND:
        raise ArtuneError(
            f"explain: {source} has no ROCm table for {rocm.describe(rocm.gfx_arch(arch) or arch)}; its tables "
            f"are for {table.platform.kind}, and what runs on an AMD GPU is not read from them"
        )
    return table


def platform_text(table: Table) -> str:
    """The table's platform in words: a ROCm arch with the capability torch reports for it and its products."""
    plat = table.platform
    text = f"{plat.kind} " + (rocm.describe(plat.arch) if plat.kind == rocm.KIND else f"arch={plat.arch}")
    return text + (f", {plat.device}" if plat.device else "")


_DEFAULT_DTYPE = {"cpu": "float32", "cuda": "bfloat16", "rocm": "bfloat16"}  # what serving on each reduces


def run_explain(args: argparse.Namespace) -> int:
    """Print the decision for one message."""
    env = settings.from_env()
    table = _explain_table(args, env)
    kind = table.platform.kind
    dtype = args.dtype or _DEFAULT_DTYPE[kind]
    nbytes, shape = _message(args, table, dtype)
    # the call a user of this table's platform makes: no multicast outside NVIDIA GPUs
    multicast = kind == "cuda" and not args.no_multicast
    # a table read by the engine's code for this dtype holds what that code decides: no list of ours on top
    unavailable = _unavailable(args, kind, None if table.dtype == dtype else dtype, nbytes, multicast, env)
    if not 1 <= args.hosts <= args.world_size:
        print(f"artune explain: --hosts must be from 1 to --world-size ({args.world_size})", file=sys.stderr)
        return 2
    if args.nvlink_domain == "rack" and args.hosts == 1:
        print("artune explain: --nvlink-domain rack needs --hosts 2 or more", file=sys.stderr)
        return 2
    available = frozenset(SPECS) - unavailable.keys()
    decision = decide(
        table, nbytes, args.world_size, args.mode, available, args.hosts, multicast, args.nvlink_domain, shape
    )
    note = ""
    if args.table and args.arch and args.arch != table.platform.arch and not table.borrowed:
        note = f"the table is for arch {table.platform.arch}, not {args.arch}; used as given"
    kernel = _vllm_kernel(table, decision.algorithm, args.world_size, nbytes)
    steps = [
        f"platform: {platform_text(table)}",
        *_explained_steps(decision, unavailable, kernel),
        *_rocm_switches(args, table, decision.algorithm),
    ]
    figures = _figures(table, decision.world_size, decision.mode, decision.multicast)
    # what the engine reading behind the table cannot vouch for, where it could touch this decision
    unverified = [c.describe() for c in table.caveats if c.touches(args.world_size)]
    unverified += _other_outcome(args, table, decision.algorithm, nbytes, available, multicast)
    call = _Explained(
        nbytes, shape, dtype, multicast if kind == "cuda" else None, kernel, note, figures, steps, unverified
    )
    if args.json:
        print(json.dumps(_explained_json(args, table, decision, call), sort_keys=True))
    else:
        _print_explained(args, decision, call)
    return 0


def _other_outcome(
    args: argparse.Namespace, table: Table, answer: str, nbytes: int, available: frozenset[str], multicast: bool
) -> list[str]:
    """Where vLLM's code tests what the evaluator cannot know (artune took it as false) at this world size: the
    answer with those tests taken as true, read by the same code, so the reader sees both outcomes."""
    from artune.formats import engine_source
    from artune.formats.pyeval.statements import FALSE

    unknown = [
        c
        for c in table.caveats
        if c.kind is CaveatKind.UNEVALUATED and c.assumed == FALSE and c.touches(args.world_size)
    ]
    found = engine_source(args.table) if args.table and unknown and table.rules == "vllm" else None
    if found is None or found[0] != "vllm" or rocm.is_gfx(args.arch or ""):
        return []
    from artune.formats.vllm.read import reading

    assume = frozenset((c.where.rpartition(":")[0], int(c.where.rpartition(":")[2])) for c in unknown)
    other = reading(found[1], _engine_env(args)[1] if args.env else {}, table.dtype or "bfloat16", assume)[0]
    decision = decide(
        other.tables.resolve(args.arch),
        nbytes,
        args.world_size,
        args.mode,
        available,
        args.hosts,
        multicast,
        args.nvlink_domain,
    )
    tests = "; ".join(sorted({c.detail.split(": ", 1)[0].removeprefix("if ").removesuffix(":") for c in unknown}))
    if decision.algorithm == answer:
        return [f"either outcome of `{tests}` runs {answer} here (read both ways)"]
    return [f"if `{tests}` holds, vLLM runs {decision.algorithm} here; artune's {answer} takes it as false"]


@dataclass(frozen=True)
class _Explained:
    """What ``explain`` found out about the call beside the decision itself."""

    nbytes: int
    shape: TokenShape | None
    dtype: str
    multicast: bool | None  # None: not a CUDA table
    kernel: tuple[str, str] | None
    note: str
    figures: str
    steps: list[str]
    unverified: list[str]


def _explain_table(args: argparse.Namespace, env: settings.Settings) -> Table:
    """The table ``explain`` decides by: environment first, command-line arguments on top (the most explicit
    wins)."""
    if args.table or args.reference:
        table = _resolve_for_explain(args)
        table = apply_overrides(table, parse_overrides(env.algorithm, env.bounds, "ARTUNE_ALGORITHM/ARTUNE_BOUNDS"))
    else:
        table = select_table(None, env)  # the Communicator's choice, the environment's overrides applied
    table = apply_overrides(table, parse_overrides(args.algorithm, ",".join(args.bound) or None, "--algorithm/--bound"))
    return as_written(table) if args.as_written else table


def _unavailable(
    args: argparse.Namespace, kind: str, dtype: str | None, nbytes: int, multicast: bool, env: settings.Settings
) -> dict[str, str]:
    """Algorithms the call cannot run, with why: the catalog's conditions, and on CPU what a Communicator here
    would find in /dev/shm."""
    unavailable = catalog.unavailable(args.world_size, dtype, nbytes, multicast, args.hosts, kind)
    if kind == "cpu" and args.world_size > 1:
        from artune.algorithms.shm import ShmOneShot, ShmTwoShot
        from artune.algorithms.shm.segment import shm_problem
        from artune.communicator.communicator import shm_env_hint

        problem = shm_problem(args.world_size, env.shm_bytes)
        if problem:
            problem += shm_env_hint(args.world_size, os.environ.get("ARTUNE_SHM_BYTES"))
            unavailable.update({a.name: f"shared memory unavailable: {problem}" for a in (ShmOneShot, ShmTwoShot)})
    return unavailable


def _explained_steps(decision: Decision, unavailable: dict[str, str], kernel: tuple[str, str] | None) -> list[str]:
    """The decision's steps, with the unmet engine condition named where a step only says "not available
    here", the kernel that runs, and the shm round's build when shm is the answer."""
    steps = [
        f"{step.split()[0]} skipped: {unavailable[step.split()[0]]}"
        if step.endswith("skipped: not available here") and step.split()[0] in unavailable
        else step
        for step in decision.steps
    ]
    steps += [f"kernel {kernel[0]}: {kernel[1]}"] if kernel else []
    if decision.algorithm.startswith("shm_"):
        from artune.algorithms.shm.native import describe  # imports torch: only when shm is the answer

        steps.append(f"shm round on this machine: {describe()}")
    return steps


def _explained_json(args: argparse.Namespace, table: Table, decision: Decision, call: _Explained) -> dict[str, Any]:
    data: dict[str, Any] = decision.as_dict()
    data["figures"] = call.figures
    if call.shape is not None:
        data.update(tokens=call.shape.tokens, hidden=call.shape.hidden, fusion=call.shape.fusion)
    data.update(
        size=call.nbytes,
        world_size=args.world_size,
        hosts=args.hosts,
        nvlink_domain=args.nvlink_domain or "host",
        mode=args.mode,
        dtype=call.dtype,
        table=table.name,
        platform=platform_text(table),
        steps=call.steps,
    )
    if call.multicast is not None:
        data["multicast"] = call.multicast
    if call.kernel:
        data["kernel"] = call.kernel[0]
    if call.note:
        data["note"] = call.note
    data["unverified"] = call.unverified
    return data


def _print_explained(args: argparse.Namespace, decision: Decision, call: _Explained) -> None:
    console = Console()
    headline = f"[bold]{decision.algorithm}[/bold]" + (f" (kernel {call.kernel[0]})" if call.kernel else "")
    headline += " [yellow]unverified[/yellow]" if call.unverified else ""
    console.print(f"{headline} {dict(decision.params) or ''}".rstrip())
    shape = call.shape
    text = f"  for {format_size(call.nbytes)} ({call.nbytes} B), world_size={args.world_size}"
    text += f", {shape.tokens} tokens x hidden {shape.hidden}, fusion {shape.fusion}" if shape else ""
    text += f" on {args.hosts} hosts" if args.hosts > 1 else ""
    if args.hosts > 1 and args.nvlink_domain is not None:
        text += " in one NVLink domain" if args.nvlink_domain == "rack" else " joined over a network"
    text += f", mode={args.mode}, dtype={call.dtype}"
    text += "" if call.multicast is None else f", multicast={'on' if call.multicast else 'off'}"
    console.print(text, highlight=False)
    for step in call.steps:
        console.print(f"  - {step}", highlight=False, markup=False, soft_wrap=True)
    if call.figures.startswith("modelled"):
        console.print(f"  - figures: {call.figures}", highlight=False, markup=False, soft_wrap=True)
    if call.note:
        console.print(f"  - note: {call.note}", highlight=False)
    for caveat in call.unverified:
        console.print(f"  - unverified: {caveat}", highlight=False, markup=False, soft_wrap=True)


def _vllm_kernel(table: Table, algorithm: str, world_size: int, nbytes: int) -> tuple[str, str] | None:
    """Which of vLLM's custom all-reduce kernels runs the message, and why (vLLM's C++ decides it per call);
    on a ROCm table the kernel of an algorithm that runs one."""
    spec = SPECS.get(algorithm)
    if table.platform.kind == rocm.KIND and spec is not None and len(spec.kernels) == 1:
        return spec.kernels[0].name, f"{algorithm} runs one kernel ({spec.summary})"
    if table.platform.kind == rocm.KIND and spec is not None and algorithm.startswith("quick_ar_"):
        return spec.kernels[0].name, (
            "vLLM's HIP QuickReduce kernel: AITER's FlyDSL INT4 kernel runs instead only where AITER provides it "
            "(rocm_aiter_ops.is_flydsl_quick_reduce_available), which artune's reading takes as not"
        )
    if table.rules != "vllm" or algorithm != "custom_ar":
        return None
    from artune.formats.vllm.rules import CUSTOM_AR_ALGO_ENV, custom_ar_kernel, release_of

    found, why = custom_ar_kernel(world_size, nbytes, os.environ.get(CUSTOM_AR_ALGO_ENV), release_of(table.origin))
    return f"cross_device_reduce_{found}", why


def _figures(table: Table, world_size: int, mode: str, multicast: bool | None = None) -> str:
    """Where the deciding plan's figures come from: ``modelled by ...`` (with its regret band) or the source."""
    plan = table.plan(world_size, mode, multicast=multicast)
    provenance = plan.provenance if plan is not None and plan.provenance is not None else table.provenance
    return modelled_summary(provenance) if provenance.source == "modelled" else provenance.source


# ------------------------------------------------------------------ show

_PALETTE = (
    "cyan",
    "magenta",
    "green",
    "yellow",
    "blue",
    "red",
    "bright_cyan",
    "bright_magenta",
    "bright_green",
    "bright_yellow",
    "bright_blue",
    "bright_red",
)
_CHART_LO, _CHART_HI, _CHART_WIDTH = 10, 30, 40  # log2 bytes shown: 1KiB .. 1GiB


def _color(name: str, colors: dict[str, str]) -> str:
    if name not in colors:
        colors[name] = _PALETTE[len(colors) % len(_PALETTE)]
    return colors[name]


def _message(args: argparse.Namespace, table: Table, dtype: str) -> tuple[int, TokenShape | None]:
    """The message's bytes, and its shape when ``--hidden`` is given: ``--tokens`` x hidden x the dtype's
    element size, or ``--size`` split into tokens of ``--hidden`` elements."""
    if args.hidden is None:
        if args.tokens is not None:
            raise ArtuneError("explain: --tokens needs --hidden (the elements a token)")
        if table.by_shape:
            raise ArtuneError(
                f"explain: {table.name} decides by shape (tokens x hidden x fused op): give --tokens N --hidden H"
            )
        if args.size is None:
            raise ArtuneError("explain: give --size (or --tokens with --hidden)")
        return parse_size(args.size, "--size"), None
    if args.hidden < 1 or (args.tokens is not None and args.tokens < 1):
        raise ArtuneError("explain: --hidden and --tokens must be positive")
    if table.fusions and args.fusion not in table.fusions:
        raise ArtuneError(f"explain: --fusion {args.fusion}: {table.name} has plans for {', '.join(table.fusions)}")
    element = DTYPE_BYTES[dtype]
    if args.tokens is not None:
        if args.size is not None:
            raise ArtuneError("explain: give --tokens or --size with --hidden, not both")
        return args.tokens * args.hidden * element, TokenShape(args.tokens, args.hidden, args.fusion)
    if args.size is None:
        raise ArtuneError("explain: --hidden needs --tokens or --size")
    nbytes = parse_size(args.size, "--size")
    tokens = nbytes // (args.hidden * element)
    if tokens < 1:
        raise ArtuneError(f"explain: --size {args.size} is less than one token of {args.hidden} {dtype} elements")
    return nbytes, TokenShape(tokens, args.hidden, args.fusion)


_TOKENS_HI = 16  # a shape plan's chart: log2 tokens 0..16


def _chart(plan: Plan | ShapePlan, colors: dict[str, str]) -> Text:
    """A log-scale bar from 1 KiB to 1 GiB (a shape plan: 1 to 65536 tokens), one colour per band's first
    candidate."""
    bar = Text()
    lo, hi = (0, _TOKENS_HI) if isinstance(plan, ShapePlan) else (_CHART_LO, _CHART_HI)
    for col in range(_CHART_WIDTH):
        nbytes = int(2 ** (lo + (col + 0.5) * (hi - lo) / _CHART_WIDTH))
        name = next(names[0] for _, upto, names in plan.spans() if upto is None or nbytes <= upto)
        bar.append("█", style=_color(name, colors))
    return bar


def _span(plan: Plan | ShapePlan, lower: int, upto: int | None) -> str:
    if isinstance(plan, Plan):
        return format_span(lower, upto)
    return f"{max(lower, 1)}+ tok" if upto is None else f"{max(lower, 1)}-{upto} tok"


def _bands_text(plan: Plan | ShapePlan, colors: dict[str, str]) -> Text:
    text = Text()
    for i, band in enumerate(plan.bands):
        previous = plan.bands[i - 1].upto if i else None
        lower = 0 if previous is None else previous + 1
        if band.upto is not None and band.upto < lower:
            text.append(f"{_span(plan, lower, band.upto)} covers nothing  ", style="red")
            continue
        text.append(_span(plan, lower, band.upto) + " ")
        for j, name in enumerate(band.candidates):
            text.append(("|" if j else "") + name, style=_color(name, colors))
        text.append("  ")
    lower, _, _ = plan.spans()[-1]
    # above a bounded last band the fallback runs; under an open-ended one only where no candidate is available
    text.append("fallback " if plan.open_ended else _span(plan, lower, None) + " ")
    text.append(plan.fallback, style=_color(plan.fallback, colors))
    return text


def _print_shape_chart(table: Table, console: Console, colors: dict[str, str]) -> None:
    """A shape table's plans: world sizes, hidden sizes and fused ops, a chart along tokens, the bands."""
    grid = RichTable(title=f"{_label(table)}  [{table.platform}]  {table.provenance}", title_justify="left")
    grid.add_column("ws", justify="right")
    grid.add_column("hidden", justify="right")
    grid.add_column("fused ops")
    grid.add_column(f"1 tok {'log2 tokens':^{_CHART_WIDTH - 12}} 64Ki", no_wrap=True)
    grid.add_column("bands")
    for plan in sorted(table.shape_plans, key=lambda p: (p.world_size, p.hidden, p.fusions)):
        ws, hidden, _fusion = plan.label.split(" ", 2)
        row = [ws.removeprefix("ws="), hidden.removeprefix("hidden="), "/".join(plan.fusions)]
        grid.add_row(*row, _chart(plan, colors), _bands_text(plan, colors))
    if table.caps:
        grid.caption = "workspace cap: " + ", ".join(
            f"{'ws <= ' + str(most) if most is not None else 'above'}: {nbytes} B" for most, nbytes in table.caps
        )
    console.print(grid)


def _print_chart(table: Table, console: Console) -> None:
    colors: dict[str, str] = {}
    if table.by_shape:
        _print_shape_chart(table, console, colors)
        if not table.plans:
            console.print()
            return
    grid = RichTable(
        title=escape(f"{_label(table)}  [{table.platform}]  {table.provenance}"),  # brackets are text, not markup
        title_justify="left",
        show_edge=False,
    )
    grid.add_column("ws", justify="right")
    grid.add_column("mode")
    grid.add_column(f"1KiB {'log2 size':^{_CHART_WIDTH - 10}} 1GiB", no_wrap=True)
    grid.add_column("bands (first available candidate wins)")
    composed = any(plan.origin for plan in table.plans)
    if composed:
        grid.add_column("answered by")
    for plan in sorted(table.plans, key=lambda p: (p.hosts, p.nvlink, p.world_size, p.multicast is not None, p.mode)):
        ws = str(plan.world_size) + (
            f" ({plan.hosts} hosts{', rack' if plan.nvlink.value == 'rack' else ''})" if plan.hosts > 1 else ""
        )
        ws += "" if plan.multicast is None else f" (multicast {'on' if plan.multicast else 'off'})"
        row = [ws, plan.mode, _chart(plan, colors), _bands_text(plan, colors)]
        grid.add_row(*row, *([plan.origin or "this table"] if composed else []))
    console.print(grid)
    params = {(p.topology.removeprefix("ws="), p.mode): p.params for p in table.plans if p.params}
    if params:
        console.print(
            "  params: "
            + "; ".join(
                f"ws={ws} {mode}: " + ", ".join(f"{n} {dict(v)}" for n, v in values)
                for (ws, mode), values in sorted(params.items())[:8]
            )
            + (" ..." if len(params) > 8 else ""),
            highlight=False,
        )
    console.print()


def _shape_subset(table: Table, hidden: int | None, fusion: str | None) -> Table:
    """A shape table's plans that a call with ``hidden`` elements a token and ``fusion`` can read (each
    ``None``: any)."""
    if not table.by_shape:
        return table
    plans = tuple(
        p
        for p in table.shape_plans
        if (hidden is None or (p.hidden <= hidden and (p.hidden_upto is None or hidden <= p.hidden_upto)))
        and (fusion is None or fusion in p.fusions)
    )
    return table.with_changes(shape_plans=plans)


def as_written(table: Table) -> Table:
    """``table`` with each plan's bands as the engine's file writes them (itself for artune's tables)."""
    if not any(plan.written for plan in table.plans):
        return table
    return table.with_changes(plans=tuple(plan.as_written() for plan in table.plans))


def run_show(args: argparse.Namespace) -> int:
    """Print each table as a chart, TOML or JSON."""
    tables = [t for spec in args.tables for t in open_tables(spec)] if args.tables else selected_source().tables
    tables = [in_domain(t, args.nvlink_domain) for t in tables]
    if args.as_written:
        tables = [as_written(t) for t in tables]
    if args.hidden is not None or args.fusion is not None:
        tables = [_shape_subset(t, args.hidden, args.fusion) for t in tables]
    if args.format == "json":
        print(json.dumps([table_to_dict(t) for t in tables], indent=1))
    elif args.format == "toml":
        for table in tables:
            if len(tables) > 1:
                print(f"# ---- {_label(table)}")
            print(dumps_table(table))
    else:
        console = Console(width=max(160, Console().width))
        for table in tables:
            _print_chart(table, console)
    return 0
