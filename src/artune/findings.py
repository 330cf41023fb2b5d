"""The kinds of finding that ``artune check`` and ``artune review`` print, each with a stable code.

A code names a kind of finding the way a linter's rule code does: it stays the
same across releases and wording changes, so ``artune check --ignore E101``
and a reviewer's link to ``docs/findings.md#e101`` keep working. The first
letter says where the finding comes from:

- ``T``: the table's structure (``artune.table.check``), any table;
- ``E``: an engine's own files, whatever the engine (``artune.formats``: copied
  arches, holes, workspace clips, rules that can never be reached);
- ``V``: vLLM only; ``S``: SGLang only; ``R``: TensorRT-LLM only;
- ``N``: ranks across nodes or a rack; ``X``: the evidence behind the figures;
- ``M``: the cost model's notes on modelled figures.

This module is the one registry: every code a finding carries has its entry
here (``tests/test_findings.py`` holds it to that), and ``docs/findings.md`` is
generated from it (``python -m artune.findings > docs/findings.md``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Protocol, TypeVar

from artune.errors import ArtuneError

PREFIXES: Mapping[str, str] = MappingProxyType(
    {
        "T": "Table structure",
        "E": "Engine files",
        "V": "vLLM",
        "S": "SGLang",
        "R": "TensorRT-LLM",
        "N": "Multi-node and rack",
        "X": "Evidence",
        "M": "Cost model",
    }
)

_CODE = re.compile(r"[A-Z][0-9]{3}")


@dataclass(frozen=True)
class FindingKind:
    """One kind of finding: its code, a title, what it means, an example line and the fix."""

    code: str
    title: str
    meaning: str
    example: str
    fix: str


def _kinds(*kinds: FindingKind) -> Mapping[str, FindingKind]:
    out: dict[str, FindingKind] = {}
    for kind in kinds:
        if not _CODE.fullmatch(kind.code) or kind.code[0] not in PREFIXES or kind.code in out:
            raise ValueError(f"finding code {kind.code!r}: a known prefix and three digits, once each")
        out[kind.code] = kind
    return MappingProxyType(out)


KINDS: Mapping[str, FindingKind] = _kinds(
    # ---------------------------------------------------------------- T: any table's structure
    FindingKind(
        "T101",
        "Band covers no size",
        "A band's `upto` does not extend the band before it: the bands are out of order or overlap, "
        "so this band is never chosen.",
        "t.toml: warning T101: arch=x86_64 ws=2 mode=eager: band 2 (upto 4KiB) does not extend band 1 "
        "(upto 64KiB): bands out of order or overlapping, it covers no size",
        "Order the bands by `upto`, each larger than the one before.",
    ),
    FindingKind(
        "T102",
        "Algorithm listed twice in a band",
        "A band's candidate list names the same algorithm twice; the second can never be reached.",
        "t.toml: warning T102: arch=x86_64 ws=2 mode=eager: band 1 lists an algorithm twice: "
        "['shm_one_shot', 'shm_one_shot']",
        "Remove the repeated name.",
    ),
    FindingKind(
        "T103",
        "Unknown algorithm",
        "A band or a fallback names an algorithm artune does not know; it is never available.",
        "t.toml: warning T103: arch=x86_64 ws=2 mode=eager: unknown algorithm 'shm_3shot'; known: ...",
        "Use a name from the list the finding prints (`artune bench` shows the ones that run here).",
    ),
    FindingKind(
        "T104",
        "Required parameter missing",
        "The algorithm needs a launch parameter the plan does not give it, so it is skipped at run time.",
        "t.toml: warning T104: arch=10.0 ws=8 mode=graph: 1shot_push needs parameter 'blocks' and has none "
        "(it will be skipped)",
        'Add it to the plan\'s `params` table, e.g. `params = { "1shot_push" = { blocks = 148 } }`.',
    ),
    FindingKind(
        "T105",
        "Algorithm never runs at this world size",
        "The algorithm only runs at some world sizes, and the plan's is not one of them.",
        "t.toml: warning T105: arch=9.0 ws=3 mode=graph: custom_ar never runs at world_size=3 (only [2, 4, 6, 8])",
        "Drop the algorithm from this plan, or move the band to a world size it runs at.",
    ),
    FindingKind(
        "T106",
        "Algorithm cannot run on the plan's topology",
        "Shared memory across hosts, or `hier_shm` on one host: the algorithm is never available for the plan.",
        "t.toml: warning T106: arch=x86_64 ws=4 hosts=2 mode=eager: shm_one_shot runs only with every rank on one "
        "host, not across 2 hosts (it will never be available for this plan)",
        "Use an algorithm that runs on that many hosts (`hier_shm`, `gloo`).",
    ),
    FindingKind(
        "T107",
        "Parameters for an unknown algorithm",
        "The plan's `params` names an algorithm artune does not know; the parameters are never used.",
        "t.toml: warning T107: arch=x86_64 ws=2 mode=eager: params for unknown algorithm 'shm_3shot'",
        "Fix the name or remove the entry.",
    ),
    FindingKind(
        "T108",
        "Graph mode on a CPU table",
        "CPU calls are always eager, so a CPU plan in `graph` mode is never used.",
        "t.toml: warning T108: arch=x86_64 ws=2 mode=graph: mode 'graph' on a CPU table; CPU has only 'eager'",
        'Write `mode = "eager"`, or drop the plan.',
    ),
    FindingKind(
        "T109",
        "Algorithm does not run on the table's platform",
        "The algorithm runs on other GPUs only (QuickReduce and AITER on ROCm, torch symmetric memory and "
        "the SGLang and TensorRT-LLM kernels on CUDA, shared memory on CPU): on this table's platform it is "
        "never available.",
        "t.toml: warning T109: arch=gfx942 ws=8 mode=eager: 2shot_push runs on CUDA only, not on ROCm (a rocm "
        "arch=gfx942 table: it will never be available)",
        "Use an algorithm of the table's platform (`artune explain` says why each one is skipped there).",
    ),
    FindingKind(
        "T201",
        "World sizes with no plan",
        "Between 2 (or the smallest planned world size, across hosts) and the largest, some world sizes have "
        "no plan: the decision borrows the nearest smaller one, which was measured for other ranks.",
        "t.toml: warning T201: arch=9.0: mode=eager: no plan for world sizes 2-7 (up to 8)",
        "Tune those world sizes (`artune tune --world-size 3`), or accept the borrowed plan knowingly.",
    ),
    FindingKind(
        "T202",
        "Mode missing for some world sizes",
        "One mode has plans for world sizes another mode lacks; calls in that mode borrow the other mode's plan.",
        "t.toml: warning T202: arch=9.0: mode=eager missing for world sizes 3 that other modes plan",
        "Tune both modes (`artune tune --device cuda` measures graph and eager).",
    ),
    FindingKind(
        "T203",
        "No plans",
        "The table has no plans, or none for ranks on one host: it answers nothing, or nothing on one host.",
        "t.toml: warning T203: arch=x86_64: table has no single-host plans",
        "Add a plan (`artune tune` writes them).",
    ),
    FindingKind(
        "T301",
        "Figures inherited, not measured",
        "The table's (or a plan's) figures were copied from another arch or machine: nothing says they hold here.",
        "t.toml: warning T301: arch=10.7: figures inherited from arch 10.3, not measured on this arch; "
        "run 'artune tune' on this hardware",
        "Run `artune tune` on the hardware and use the measured table.",
    ),
    FindingKind(
        "T401",
        "Answered by another table (note)",
        "A key (world size, hosts, mode) this table has no plan for is answered by the next table down, "
        "such as the bundled default. Information, not a problem.",
        "tune-out/table.toml: note T401: arch=x86_64 ws=4 hosts=2 mode=eager: answered by the bundled default "
        "(bundled:cpu), since this table has no ws=4 hosts=2 mode=eager plan",
        "None needed; tune that key to replace the answer with a measured one.",
    ),
    # ---------------------------------------------------------------- E: any engine's files
    FindingKind(
        "E101",
        "Arch copied from another",
        "An arch's rows equal another arch's in every table: the reviewer asks whether they were measured "
        "on that GPU or copied.",
        "vllm==0.33.0/.../all_reduce_utils.py:50: warning E101: arch=10.7: 10.7 = 10.3 in 3 of 3 tables: "
        "measured, or inherited?",
        "Measure the arch (`artune tune --device cuda` on it) and write its own rows, or say in the pull "
        "request that the rows are inherited.",
    ),
    FindingKind(
        "E102",
        "Rule shadowed",
        "An earlier rule can run wherever this one can, over all of its sizes: this rule can never be reached.",
        "configs/custom_all_reduce_v2.py:120: warning E102: arch=9.0: 2shot_pull is shadowed by 1shot_push: "
        "it can never be reached; at world size 2 (graph)",
        "Remove the rule, or end the earlier rule where this one should start.",
    ),
    FindingKind(
        "E103",
        "Rule left only unaligned sizes",
        "After the earlier rules, the rule is left only sizes the engine's 16-byte alignment rule never sends "
        "to it: it can never be reached.",
        "configs/custom_all_reduce_v2.py:120: warning E103: arch=9.0: 1shot_pull is left only (4096, 4100], "
        "which holds no 16-byte-aligned size: it never runs; at world size 2",
        "Move the bound to a multiple of 16 bytes, or remove the rule.",
    ),
    FindingKind(
        "E201",
        "World sizes with no config",
        "World sizes between 2 and the largest configured one have no config (or no path on any arch): the "
        "engine sends every size to NCCL there, silently.",
        "vllm==0.33.0/.../all_reduce_utils.py:31: warning E201: arch=*: world sizes 3, 5, 7, 9-15 have no path "
        "on any arch: vLLM sends every size to nccl there, silently",
        "Add configs for the world sizes the engine serves, or state that NCCL is meant there.",
    ),
    FindingKind(
        "E202",
        "The engine raises",
        "At these world sizes the engine raises (a `KeyError` at start-up or on the first all-reduce) where the "
        "tables admit the call; the engine then fails or falls back to NCCL.",
        "sglang==0.5.17/.../custom_all_reduce_v2.py:88: error E202: arch=9.0: CustomAllReduceV2.__init__ raises "
        "(KeyError) at world sizes 9-16, which the communicator admits: SGLang logs 'Setup Custom allreduce "
        "failed' and runs nccl there",
        "Add the missing rows, or keep the communicator from admitting those world sizes.",
    ),
    FindingKind(
        "E203",
        "The engine's own code raises",
        "Evaluated for this arch and world size on one host, the engine's own dispatch code raises (a `KeyError`, "
        "a failed `assert`): the engine fails at start-up, or on its first all-reduce, and no table says what "
        "runs there. `artune explain` says so at that world size; `artune verify-engine` counts it as the "
        "engine's answer.",
        "vllm/.../custom_all_reduce.py:323: error E203: arch=9.0 ws=3: vLLM raises KeyError at world size 3 "
        "(custom_all_reduce.py:323: KeyError 3 in self._DEFAULT_MNNVL_ALL_GATHER_MAX_SIZES[world_size]): it "
        "fails at start-up",
        "Keep the code from admitting a world size its tables do not hold, or add the missing rows.",
    ),
    FindingKind(
        "E301",
        "Bound clipped by a workspace cap",
        "A row's bound is above a buffer or workspace the engine allocates by default (vLLM's 8 MiB custom "
        "all-reduce buffer, SGLang's 16 MiB workspace, FlashInfer's 64 MB / world size): above the cap the next "
        "path runs, not what the row writes. `artune explain` shows both.",
        "sglang==0.5.23/.../custom_all_reduce_v2.py:277: warning E301: arch=9.0, 10.0, 10.7: SGLang's 16MiB "
        "default workspace (SGLANG_CUSTOM_ALL_REDUCE_V2_MAX_SIZE_KB) clips the rows above it: nccl runs there",
        "Lower the bound to the cap, or raise the cap's default with the rows.",
    ),
    FindingKind(
        "E401",
        "Dispatch code artune cannot evaluate",
        "The engine's dispatch holds a statement or a call that artune's evaluator does not model (new code: a "
        "release or a pull request artune was not built against). Everything else is still read; the decisions "
        "this code could change are unverified, and `artune explain` marks them and says what artune assumed.",
        "vllm:./vllm/distributed/device_communicators/custom_all_reduce.py:512: warning E401: arch=10.0: "
        "CustomAllreduce.should_custom_ar: 'if torch.cuda.is_current_stream_capturing() and flag():' not "
        "evaluated (call to flag, not defined in the file); artune assumed the condition is false",
        "Run the engine's own code on it: `artune verify-engine SOURCE`. If it agrees, the reading holds for these "
        "probes; either way, report the construct so artune's evaluator can model it.",
    ),
    FindingKind(
        "E402",
        "Dispatch function unlike any verified release",
        "A dispatch function artune evaluates differs (its code, docstrings and comments aside) from that function "
        "in every release whose decisions the engine's own code confirmed. artune still evaluates it, but nothing "
        "has checked that reading against the engine: a change of logic, not of a table.",
        "vllm==0.34.0/vllm/distributed/device_communicators/custom_all_reduce.py:500: warning E402: arch=any: "
        "CustomAllreduce.should_custom_ar differs from every release artune was checked against; nearest 0.33.0",
        "Run `artune verify-engine SOURCE`: it runs the engine's own code on every probe and prints where artune's "
        "reading differs. A reviewer reads the function's diff (`artune review` shows it).",
    ),
    FindingKind(
        "E420",
        "Engine code outside what artune reads",
        "A reading stopped at a construct artune's evaluator does not read, or at a value larger than a table "
        "file builds (an integer of more than 65,536 bits, a string of more than a million characters, a list of "
        "more than 100,000 items): nothing of the file was run. The command exits 2.",
        "artune check: error E420: vllm:./vllm/distributed/device_communicators/all_reduce_utils.py:12: result "
        "too large for a table value: an integer of 131072 bits (the most is 65536)",
        "Point artune at the engine's own dispatch files; if they are, report the construct with the file.",
    ),
    FindingKind(
        "E421",
        "Reading stopped at its time or memory limit",
        "Reading the engine's code ran past `--timeout` (seconds) or `--max-memory` (MiB), or failed inside "
        "artune; the reading ran in a child process under those limits, and the line names the file it was "
        "reading. The defaults are far above any release's reading (docs/results/bounded-readings.md). "
        "The command exits 2.",
        "artune check: error E421: reading vllm/distributed/device_communicators/custom_all_reduce.py ran past "
        "the time limit of 30 s (--timeout); is this the engine's dispatch file?",
        "Check the file named: a release reads in seconds. Raise `--timeout` or `--max-memory` only for a file "
        "you trust.",
    ),
    FindingKind(
        "E422",
        "Path refused",
        "A file of the engine's tree resolves outside the tree given (a symbolic link, `..`), or is a FIFO, a "
        "socket, a device or a directory: artune does not open it and quotes nothing from outside the tree. The "
        "command exits 2.",
        "artune check: error E422: v/vllm/distributed/device_communicators/all_reduce_utils.py: refused: it "
        "resolves outside the tree read (v); artune reads only files inside it",
        "Give artune a checkout whose dispatch files are regular files inside it.",
    ),
    # ---------------------------------------------------------------- V: vLLM
    FindingKind(
        "V101",
        "No per-arch tables (note)",
        "The vLLM release has no per-arch size tables: one line says what it runs on every arch.",
        "vllm==0.10.0/.../custom_all_reduce.py:1: note V101: arch=*: vLLM 0.10.0 has no per-arch tables "
        "(no CUSTOM_ALL_REDUCE_MAX_SIZES): on every arch it runs ...",
        "None needed: information.",
    ),
    FindingKind(
        "V102",
        "Multimem list out of step with the size table",
        "`_WORLD_SIZES_MULTIMEM` names an arch or world sizes that `SYMM_MEM_ALL_REDUCE_MAX_SIZES` does not: "
        "those entries are never used. The two tables must stay in step.",
        "symm_mem.py:20: warning V102: arch=10.7: _WORLD_SIZES_MULTIMEM['10.7'] lists world sizes [16] that "
        "SYMM_MEM_ALL_REDUCE_MAX_SIZES does not: never used",
        "Add the size-table rows, or drop the multimem entries.",
    ),
    FindingKind(
        "V103",
        "Rows unused with the default settings",
        "Symmetric memory is off by default in this release, or a custom all-reduce row has no symmetric-memory "
        "row beside it: vLLM never reads the row, and custom all-reduce keeps its 8 MiB default.",
        "all_reduce_utils.py:33: warning V103: arch=*: CUSTOM_ALL_REDUCE_MAX_SIZES rows never used: a row applies "
        "only where torch symmetric memory starts, and SYMM_MEM_ALL_REDUCE_MAX_SIZES has no row for 9.0 ws=6",
        "Add the symmetric-memory row, or remove the custom all-reduce row.",
    ),
    FindingKind(
        "V104",
        "Rows that never run with vLLM's defaults",
        "An earlier path (FlashInfer's all-reduce, on and asked first from vLLM 0.29) takes every size these "
        "rows hold, so they never run.",
        "all_reduce_utils.py:32: warning V104: arch=*: CUSTOM_ALL_REDUCE_MAX_SIZES rows that never run with "
        "vLLM's defaults: flashinfer_ar takes every size they hold first, ...",
        "End the FlashInfer row where these rows should take over, or remove them.",
    ),
    FindingKind(
        "V105",
        "FlashInfer row never used",
        "A FlashInfer fusion row is for a world size FlashInfer does not support, or an MNNVL row has no fusion "
        "row for its arch and world size: vLLM never reads it.",
        "all_reduce_utils.py:70: warning V105: arch=10.0: FI_ALLREDUCE_FUSION_MAX_SIZE_MB row for world size 16 "
        "is never used: FI_SUPPORTED_WORLD_SIZES = [2, 4, 8]",
        "Remove the row, or add the world size where FlashInfer supports it.",
    ),
    FindingKind(
        "V106",
        "Dispatch code no rule describes (note)",
        "The release's own dispatch code, which artune evaluated, decides otherwise than vLLM's rules as artune "
        "describes them (fitted to the code) at these world sizes: their plans hold what the code runs, without "
        "rows as written or notes on why, and the findings about them are the rules'. Code no release had, such "
        "as a pull request's, does this.",
        "cuda_communicator.py: note V106: arch=*: vllm:. 's dispatch code decides otherwise than vLLM's rules as "
        "artune describes them at 9.0 ws=4, 9.0 ws=8: its plans there hold what the code runs, ...",
        "Read the plans (artune explain, artune show): they are the code's. Run artune verify-engine vllm:PATH to "
        "check the reading against the engine's own code.",
    ),
    FindingKind(
        "V107",
        "Release artune never verified (note)",
        "A vLLM release that no `artune verify-engine --record` run kept: every dispatch function artune "
        "evaluated in it matches one of a verified release, so the reading is that release's, but nothing ran "
        "this release's own code against it.",
        "all_reduce_utils.py: note V107: arch=*: vLLM 0.35.0 is not among the releases artune verified against "
        "vLLM's own code (artune verify-engine vllm==0.35.0 --record keeps it); every dispatch function it "
        "evaluated matches vLLM 0.34.0's",
        "Run artune verify-engine vllm==VERSION; once every probe agrees, --record keeps its fingerprints.",
    ),
    FindingKind(
        "V110",
        "vLLM raises at start-up on ROCm",
        "Building the tensor-parallel communicator on one host of an AMD GPU raises under the settings read: "
        "the release's envs.py refuses a QuickReduce level it does not know (INT3 before the release that added "
        "it), or QuickReduce's own checks raise.",
        "vllm==0.20.0/vllm/envs.py:362: error V110: arch=gfx942: vLLM raises at start-up on ROCm at world sizes "
        "2, 4, 8: under VLLM_ROCM_QUICK_REDUCE_QUANTIZATION=INT3, the file raises ValueError(...)",
        "Set a level the release lists (FP, INT8, INT6, INT4, NONE), or use the release that added it.",
    ),
    FindingKind(
        "V111",
        "QuickReduce level that never runs",
        "A `_QR_MIN_SIZE` minimum at or above QuickReduce's whole buffer (`ops.qr_max_size()`, 2 GiB): with that "
        "level set, QuickReduce is on at that world size and dtype and takes no message.",
        "quick_all_reduce.py:60: warning V111: arch=gfx94*, gfx95* ws=8: _QR_MIN_SIZE row (bfloat16, 8): QuickReduce "
        "at INT8, INT6, INT4, INT3 never runs at world size 8 for bfloat16: its minimum is ... 2 GiB ...",
        "Write the measured crossover, or say in the table that the level is off there (and why).",
    ),
    FindingKind(
        "V112",
        "QuickReduce world size without a row",
        "`_SUPPORTED_WORLD_SIZES` admits a world size (for a supported dtype) that `_QR_MIN_SIZE` has no row for: "
        "`should_quick_allreduce` raises KeyError on the first message QuickReduce is asked to take there.",
        "quick_all_reduce.py:52: error V112: arch=gfx94*, gfx95*: _QR_MIN_SIZE has no row for bfloat16 at world "
        "size 6, which _SUPPORTED_WORLD_SIZES admits: should_quick_allreduce raises KeyError ...",
        "Add the row (measured), or drop the world size from `_SUPPORTED_WORLD_SIZES`.",
    ),
    FindingKind(
        "V113",
        "QuickReduce rows copied between dtypes",
        "A `_QR_MIN_SIZE` row equals the other dtype's at the same world size: fp16 and bf16 kernels differ in "
        "speed, so equal crossovers are a question for the author.",
        "quick_all_reduce.py:57: warning V113: arch=gfx94*, gfx95* ws=2: _QR_MIN_SIZE row (bfloat16, 2) equals the "
        "float16 row at world size 2: ... measured, or copied?",
        "Measure both dtypes (their own sweeps), or say the row is copied.",
    ),
    FindingKind(
        "V114",
        "QuickReduce maximum clipped by the environment",
        "`VLLM_ROCM_QUICK_REDUCE_MAX_SIZE_BYTES_MB` caps QuickReduce below a level's `_QR_MIN_SIZE` minimum: no "
        "message is both above the minimum and below the cap, so the cap clips the level away at that world size.",
        "quick_all_reduce.py:57: warning V114: arch=gfx94*, gfx95* ws=4: VLLM_ROCM_QUICK_REDUCE_MAX_SIZE_BYTES_MB "
        "caps QuickReduce at 4 MiB, below the minimum of the _QR_MIN_SIZE row (float16, 4) at INT8, INT6 ...",
        "Raise the cap above the minimum, or choose a level whose minimum it clears.",
    ),
    # ---------------------------------------------------------------- S: SGLang
    FindingKind(
        "V120",
        "vLLM decides another dtype otherwise",
        "vLLM's code, read for fp16 or fp32 messages, decides otherwise than its bf16 tables do with the dtype "
        "conditions artune's catalog keeps: a bound or a branch depends on the dtype. `artune explain --dtype` "
        "reads the code for that dtype; a table that is exported or diffed holds bf16's decisions.",
        "vllm/.../envs.py: note V120: arch=*: for float32 messages vLLM's code decides otherwise than its "
        "bfloat16 tables (with artune's dtype conditions) at 9.0 ws=6 multicast=off: `artune explain --dtype "
        "float32` reads what it runs there; a table exported or diffed holds bfloat16's",
        "Nothing to fix where the dtype is meant to decide; otherwise make the branch the same for every dtype.",
    ),
    FindingKind(
        "S101",
        "Configs file read alone (note)",
        "Only the configs file was given: its rows are read in the order SGLang's `Heuristic` documents and "
        "clipped to the default workspace, not by the communicator's own dispatch.",
        "custom_all_reduce_v2.py:1: note S101: arch=all: no CustomAllReduceV2 beside this configs file: ...",
        "Give the checkout (`sglang:PATH`) or the release (`sglang==VERSION`) to read SGLang's own dispatch.",
    ),
    FindingKind(
        "S102",
        "Pull buffer ends custom all-reduce (note)",
        "`CustomAllReduceV2`'s 16 MiB pull buffer ends custom all-reduce: NCCL runs above it, where the rows "
        "write a custom algorithm for every size.",
        "configs/custom_all_reduce_v2.py:160: note S102: arch=9.0: the 16MiB pull buffer "
        "(CustomAllReduceV2.__init__'s max_pull_size default) ends custom all-reduce: nccl runs above it, ...",
        "None needed, unless the rows mean the custom algorithm above 16 MiB: then raise `max_pull_size`.",
    ),
    FindingKind(
        "S103",
        "Multicast asked where it has no blocks",
        "Rows ask for multicast two-shot (a non-empty `mc` range) at world sizes where `num_mc_blocks` is None: "
        "multicast never runs there.",
        "configs/custom_all_reduce_v2.py:200: warning S103: arch=10.0: rows ask for multicast two-shot "
        "(a non-empty mc range) at world size 3, where num_mc_blocks is None: multicast never runs there",
        "Give `num_mc_blocks` for those world sizes, or empty the `mc` range.",
    ),
    FindingKind(
        "S104",
        "Arch served by the dispatch (note)",
        "Arches with no configs of their own get another arch's configs (or the default ones) through SGLang's "
        "dispatch on the GPU's capability.",
        "configs/custom_all_reduce_v2.py:316: note S104: arch=10.3, 12.0: no configs of their own: SGLang's "
        "dispatch on the GPU's capability gives 10.3 the configs of 10.0; 12.0 its default configs",
        "None needed, unless the arch should have measured rows of its own.",
    ),
    FindingKind(
        "S105",
        "Custom all-reduce v2 off by default (note)",
        "In this release SGLang takes custom all-reduce v2 only when a setting switches it on: by default its "
        "`dispatch_custom_allreduce` picks the legacy `CustomAllreduce`, and the tables describe that "
        "(`custom_ar_v1` where its `should_custom_ar` admits the size).",
        "sglang==0.5.10/.../custom_all_reduce.py:347: note S105: arch=all: custom all-reduce v2 is off by default "
        "in this release (SGLang takes it when `_is_cuda and get_bool_env_var('SGLANG_USE_JIT_ALL_REDUCE', "
        "default='false')`): by default SGLang runs its legacy CustomAllreduce, which these tables describe ...",
        "None needed: information. The v2 findings (holes, clipped rows) describe it switched on.",
    ),
    FindingKind(
        "S106",
        "Legacy communicator where v2 declines (note)",
        "At these world sizes `dispatch_custom_allreduce` picks SGLang's legacy `CustomAllreduce`, because "
        "`can_use_custom_all_reduce_v2` declines the group: `custom_ar_v1` runs there, not v2's algorithms.",
        "sglang==0.5.23/.../custom_all_reduce.py:373: note S106: arch=10.0: dispatch_custom_allreduce picks "
        "SGLang's legacy CustomAllreduce at world size 6, where v2 declines the group: custom_ar_v1 runs there ...",
        "None needed, unless v2 should take those world sizes: then give them configs.",
    ),
    FindingKind(
        "S108",
        "What runs on PCIe-only GPUs (note)",
        "artune's SGLang tables are for GPUs with NVLink between every pair. On PCIe-only GPUs SGLang's own code "
        "decides otherwise: `can_use_custom_all_reduce_with_nvlink` gives no group above two GPUs and a PCIe one "
        "at two, so v2 declines and the legacy `CustomAllreduce` runs `custom_ar_v1` at two ranks at most.",
        "sglang==0.5.23/.../custom_all_reduce.py:373: note S108: arch=9.0, 10.0, 10.7, default: on PCIe-only GPUs "
        "(no NVLink between every pair; ...) SGLang runs custom_ar_v1 at world size 2 up to 8MiB; nccl everywhere "
        "else ...",
        "None needed: information. On such a machine measure its own table (`artune tune`).",
    ),
    FindingKind(
        "S107",
        "No dispatcher beside the communicator (note)",
        "Only `custom_all_reduce_v2.py` was given, without `custom_all_reduce.py`: artune takes `CustomAllReduceV2` "
        "as the class SGLang builds for every group, where SGLang's `dispatch_custom_allreduce` would decide it.",
        "custom_all_reduce_v2.py:1: note S107: arch=all: no custom_all_reduce.py beside CustomAllReduceV2: ...",
        "Give the checkout (`sglang:PATH`) or the release (`sglang==VERSION`) to read SGLang's own choice.",
    ),
    # ---------------------------------------------------------------- R: TensorRT-LLM's lookup tables
    FindingKind(
        "R101",
        "Arch runs another SM's table",
        "TensorRT-LLM maps every SM from 100 up to the SM100 table, so B300 (10.3), Rubin (10.7) and SM 120 run"
        " B200's cells, whatever was measured on them.",
        "warning R101 arch=10.3: B300 (SM 103) runs the SM100 table: measured on B300, or inherited?",
        "Measure that arch and give it its own table, or accept the mapping knowingly.",
    ),
    FindingKind(
        "R102",
        "World size read from another row",
        "The truncated log2 index reads TP 3 from TP 2's row and TP 6 from TP 4's; TP 16 is beyond the table.",
        "warning R102 arch=9.0 ws=6: TP 6 reads the TP 4 row (truncated log2)",
        "Measure those world sizes and add their rows.",
    ),
    FindingKind(
        "R103",
        "Hidden size read from another row",
        "hidden 5120, 6144, 7168 and 12288 (common models) read the row of the power of two below them; 16384 "
        "and up are out of range.",
        "warning R103 arch=9.0: hidden 7168 (DeepSeek-V3) reads the hidden 4096 row",
        "Measure the hidden sizes of the models served.",
    ),
    FindingKind(
        "R104",
        "Tokens beyond the table",
        "Token counts from the end of the token axis up (32768 in the released headers) are out of range and "
        "take the revision's out-of-range strategy.",
        "warning R104 arch=9.0: tokens from 32768 up are beyond the table: NCCL_SYMMETRIC",
        "Extend the token axis, or make the out-of-range strategy the measured winner.",
    ),
    FindingKind(
        "R105",
        "A fused-op plane that is all NCCL",
        "Every cell of a fused op's plane names NCCL, which the benchmark writes where it skipped the op (NVFP4"
        " below SM 100).",
        "warning R105 arch=9.0: the NVFP4 plane is NCCL in every cell",
        "Benchmark that plane, or say why NCCL is meant.",
    ),
    FindingKind(
        "R106",
        "A constant disagrees with its table",
        "A k...Choice constant (kNumTokensChoice = 14) disagrees with the length of the rows it indexes (15).",
        "warning R106: kNumTokensChoice = 14, but the rows hold 15 entries",
        "Fix the constant to the rows' length.",
    ),
    FindingKind(
        "R107",
        "Strategies flip along the token axis",
        "Cells alternate between strategies along the token axis (4, 5, 5, 4, 5, 4) with no evidence that the "
        "machine does: what a per-cell argmin over one noisy run writes.",
        "warning R107 arch=9.0 ws=8 hidden=4096: ONESHOT and TWOSHOT alternate 3 times along the tokens",
        "Measure again with rounds and derive by the evidence rule (`artune tune --from-trtllm-csv`).",
    ),
    FindingKind(
        "R108",
        "The workspace cap overrides a cell",
        "A bf16 message over the workspace (64 MiB by default, TRTLLM_ALLREDUCE_FUSION_WORKSPACE_SIZE) goes to "
        "NCCL where the cell names a kernel.",
        "warning R108 arch=9.0 ws=2 hidden=8192: tokens from 4097 run NCCL: the 64MiB workspace, not the cell's"
        " TWOSHOT",
        "Raise the workspace, or write NCCL in those cells.",
    ),
    FindingKind(
        "R109",
        "The autotuner decides under AUTO",
        "Under AllReduceStrategy.AUTO the PyTorch flow asks its autotuner rather than the table unless "
        "TLLM_DISABLE_ALLREDUCE_AUTOTUNE=1. Information, not a problem.",
        "note R109: under AUTO the autotuner decides unless TLLM_DISABLE_ALLREDUCE_AUTOTUNE=1",
        "Know which one decides in the deployment.",
    ),
    FindingKind(
        "R110",
        "The engine's own code has no strategy here",
        "Running selectStrategyLookUpTable, some calls get no strategy: the code throws (.at() of a missing key) or "
        "its behaviour is undefined (a fused op mapFusionOpToIndex lacks, whose find() is dereferenced), so "
        "artune has no plan for them.",
        "warning R110: RMS_NORM: the engine's own code has no strategy (undefined: ->second of an end() "
        "iterator) at ws 1+ hidden 1+",
        "Add the fused op to mapFusionOpToIndex, or guard the lookup (the newest revisions send an unknown fused "
        "op to NCCL); or make sure no caller asks for it.",
    ),
    # ---------------------------------------------------------------- X: the evidence behind a review
    FindingKind(
        "X100",
        "A row scored on a sweep",
        "`artune check --evidence`: the row's geomean regret as the engine runs it on the sweep, beside the best "
        "row the engine's knobs allow and the fastest-column bound. Information, not a problem.",
        "note X100 arch=10.3 ws=6 mode=graph: as run: geomean 1.196, worst 2.21 at 4MiB; best row 1.002; bound 1.000",
        "None needed.",
    ),
    FindingKind(
        "X101",
        "Row loses to the best row its engine allows",
        "On the sweep, the row as run is slower than the best row the engine's own knobs allow by more than the "
        "sweep's own noise; the finding names the best row's knobs.",
        "warning X101 arch=10.3 ws=6 mode=graph: loses to the best row (custom-AR cap 192KiB, ...) by 19%",
        "Paste the best row (`artune.evidence.best_row(...).text`), or measure again if the sweep is suspect.",
    ),
    FindingKind(
        "X102",
        "Sizes the sweep cannot score",
        "The sweep has no column for the kernel the engine runs at these sizes, so they are named and left "
        "unscored; no other column stands in.",
        "note X102 arch=10.3 ws=6 mode=graph: not scored, the sweep did not measure the kernel: 16KiB, 32KiB",
        "Run a sweep that measures that kernel (for vLLM, the ca_1stage / ca_2stage columns).",
    ),
    FindingKind(
        "X103",
        "The sweep measured none of the row's kernels",
        "No size of the row can be scored on the sweep: it measured none of the kernels the row runs.",
        "warning X103 arch=10.0 ws=8 mode=graph: the sweep measured none of the row's kernels",
        "Measure with the engine's own benchmark, which times each of its kernels.",
    ),
    FindingKind(
        "X104",
        "No knob search for this engine",
        "The row is scored as run, but artune has no search of this engine's knobs for a best row.",
        "note X104 arch=10.0 ws=4 mode=graph: as run: geomean 1.02; no knob search for sglang rows",
        "None needed.",
    ),
    FindingKind(
        "X111",
        "Moved range nothing measured",
        "`artune review`: ranges move at an arch and world size where no evidence (a benchmark's output, an "
        "`artune tune` log) measured anything. The review prints the command that measures them.",
        "| **X111** | 10.0 | 4 | graph (640KiB, 2.25MiB], (2.25MiB, 8MiB]; eager (640KiB, 3MiB], (3MiB, 8MiB] |",
        "Run the printed command on that GPU and commit its output to the evidence folder.",
    ),
    FindingKind(
        "X112",
        "Sweep does not reach every moved bound",
        "A sweep at that arch and world size exists, but its sizes do not reach both sides of every moved bound; "
        "the review says what it lacks.",
        "- **X112** arch 10.0, ws 8: the evidence does not reach every bound: sweep.json (graph): 512KiB.",
        "Add the sizes it lacks to the sweep's size list and run it again.",
    ),
    FindingKind(
        "X113",
        "Modelled loss beyond the interval",
        "Nothing measured the moved sizes, and the cost model predicts AFTER's rows slower than BEFORE's beyond "
        "its own interval.",
        "- **warning X113** arch 10.0 ws 4 (eager): the cost model (b200) predicts AFTER slower over the moved "
        "sizes: regret 1.01 before, 1.09 after (90th percentile 1.12), a loss beyond its interval; ...",
        "Measure it (X111's command), or explain in the pull request why the model is wrong there.",
    ),
    FindingKind(
        "X114",
        "Evidence has no column for the kernel",
        "The sweep has no column for the kernel a moved row runs (SGLang's benchmarks time its dispatch, not "
        "its kernels), so it cannot answer those sizes.",
        "- **warning X114** arch 10.0 ws 4 (graph): bench.txt has no column for two-shot push (2shot_push runs "
        "it at 1MiB, 2MiB): it cannot answer those moved sizes; measure two-shot push there",
        "Measure that kernel: for SGLang, `artune tune` on the GPU and `artune review --measured`.",
    ),
    FindingKind(
        "X201",
        "Measured: AFTER slower than BEFORE",
        "Measured: AFTER's moved rows have more regret than BEFORE's, beyond the sweep's or the run's noise. "
        "The review requests changes.",
        "- **error X201** arch 10.0 ws 8 (graph): measured on 12 sizes in (256KiB, 8MiB], AFTER's rows "
        "(2shot_push) have regret 1.080 against BEFORE's 1.010, beyond the sweep's noise (2.0%); ...",
        "Keep BEFORE's rows there (the finding names them), or measure again if the run was disturbed.",
    ),
    FindingKind(
        "X202",
        "Measured: a better row the rules allow",
        "Measured: AFTER's row loses, beyond the noise, to the best row the engine's rules allow on that sweep.",
        "- **error X202** arch 10.0 ws 4 (graph): AFTER's row scores 1.060 on the sweep as the engine runs it, "
        "the best row its rules allow 1.004, beyond the sweep's noise (2.0%); the better row: ...",
        "Paste the best row the review prints under Evidence.",
    ),
    # ---------------------------------------------------------------- N: ranks across nodes or a rack
    FindingKind(
        "N101",
        "vLLM across a rack (note)",
        "Per arch, the world sizes and node counts where vLLM starts a path across hosts in one NVLink domain "
        "(FlashInfer's mnnvl all-reduce, custom all-reduce's MNNVL mode, torch symmetric memory); every other "
        "one across hosts, and every one over a network, runs nccl.",
        "vllm==0.33.0/.../all_reduce_utils.py:87: note N101: arch=10.3: across hosts in one NVLink domain "
        "(nvlink=rack) vLLM 0.33.0 starts ... ws=16 on 2, 4, 8, 16 hosts: flashinfer_ar; ...",
        "Information: `artune explain --hosts N --nvlink-domain rack` shows what runs at one size.",
    ),
    FindingKind(
        "N102",
        "Multi-node FlashInfer row without a one-host row",
        "`FI_MNNVL_ALLREDUCE_MAX_SIZE_MB` tunes `(cc, ws, nodes)` across hosts but has no `(cc, ws, 1)` row: "
        "on one host that world size runs the untuned fusion bound.",
        "vllm==0.33.0/.../all_reduce_utils.py:93: warning N102: arch=10.3 ws=16 hosts=4: "
        "FI_MNNVL_ALLREDUCE_MAX_SIZE_MB has a multi-node row (103, 16, 4) but no one-host row (103, 16, 1): ...",
        "Add the `(cc, ws, 1)` row, or say why one host keeps the fusion bound.",
    ),
    FindingKind(
        "N103",
        "vLLM raises across hosts over a network",
        "SymmMemCommunicator calls torch symmetric memory's rendezvous without catching its RuntimeError, "
        "which it raises between NVLink domains: the release stops at start-up (vLLM 0.11.0).",
        "vllm==0.11.0/.../all_reduce_utils.py:52: error N103: arch=10.0: vLLM 0.11.0 raises at start-up "
        "across hosts joined over a network at world sizes 2, 4, 6, 8: ...",
        "Use vLLM 0.11.1 or later, or `VLLM_ALLREDUCE_USE_SYMM_MEM=0` across hosts.",
    ),
    FindingKind(
        "N111",
        "SGLang across a rack (note)",
        "The world sizes where SGLang's custom all-reduce v2 runs across hosts in one NVLink clique (with a "
        "VMM-backed allocator), graph-captured calls on the eager plans; every other one runs nccl.",
        "sglang==0.5.23/.../custom_all_reduce_v2.py:1: note N111: arch=9.0, 10.0, 10.7, default: across hosts "
        "in one NVLink clique (nvlink=rack) custom all-reduce v2 runs at ...",
        "Information: `artune explain --hosts N --nvlink-domain rack --mode graph` shows the eager plan it takes.",
    ),
    # ---------------------------------------------------------------- M: the cost model
    FindingKind(
        "M101",
        "Figures modelled, not measured (note)",
        "The table or plan was predicted by artune's cost model (`artune plan`), with its predicted regret band.",
        "rubin.toml: note M101: arch=10.7 ws=8 mode=graph: plan modelled by artune.model/1, not measured "
        "(predicted regret 1.005 geomean (p90 1.013))",
        "`artune verify` or `artune tune` on the hardware turns the prediction into a measurement.",
    ),
)


class _Coded(Protocol):
    @property
    def code(self) -> str: ...


_F = TypeVar("_F", bound=_Coded)


def parse_codes(text: str | None, option: str) -> tuple[str, ...]:
    """``"T1,E101"`` -> ``("T1", "E101")``; each a code or a prefix of one (as ruff's ``--select`` takes)."""
    if not text:
        return ()
    out = tuple(part.strip().upper() for part in text.split(",") if part.strip())
    for part in out:
        if not any(code.startswith(part) for code in KINDS):
            known = ", ".join(PREFIXES)
            raise ArtuneError(
                f"{option}: {part!r} is no finding code nor a prefix of one (prefixes {known}; "
                "the codes are listed in docs/findings.md)"
            )
    return out


def selected(findings: Iterable[_F], select: Sequence[str] = (), ignore: Sequence[str] = ()) -> list[_F]:
    """The findings whose code starts with one of ``select`` (all when empty) and with none of ``ignore``."""
    return [
        f
        for f in findings
        if (not select or f.code.startswith(tuple(select))) and not (ignore and f.code.startswith(tuple(ignore)))
    ]


def markdown() -> str:
    """``docs/findings.md``: every code with its meaning, an example and the fix, grouped by prefix."""
    out = [
        "# Finding codes",
        "",
        "<!-- generated by `python -m artune.findings > docs/findings.md`; tests/test_findings.py checks it -->",
        "",
        "Every line `artune check` prints, and every question `artune review` asks, carries a code such as "
        "`E101`. The code stays the same when the wording changes. Filter by it:",
        "",
        "```sh",
        "artune check reference:vllm --ignore E101        # everything but copied arches",
        "artune check sglang==0.5.23 --select E,S         # engine-file and SGLang findings only",
        "```",
        "",
        "A prefix selects every code that starts with it. `note` lines are information and do not count "
        "towards the exit status.",
        "",
    ]
    for prefix, title in PREFIXES.items():
        kinds = [k for k in KINDS.values() if k.code.startswith(prefix)]
        out += [f"## {prefix}: {title}", ""]
        if not kinds:
            out += ["No codes yet.", ""]
        for kind in kinds:
            out += [
                f"### {kind.code}: {kind.title} {{#{kind.code.lower()}}}",
                "",
                kind.meaning,
                "",
                "```text",
                kind.example,
                "```",
                "",
                f"**Fix.** {kind.fix}",
                "",
            ]
    return "\n".join(out).rstrip() + "\n"


if __name__ == "__main__":
    print(markdown(), end="")
