"""vLLM's all-reduce dispatch read by its own code: the release's communicators evaluated on each machine.

A release decides in Python: ``CudaCommunicator.__init__`` builds the
communicators its switches and the machine allow (``SymmMemCommunicator``,
``FlashInferAllReduce``, ``CustomAllreduce``, QuickReduce on ROCm), each
``__init__`` deciding whether it starts and with what bound, and
``CudaCommunicator.all_reduce`` asks them in its order (``should_use_fi_ar``,
``should_nccl_symm_mem_allreduce``, ``should_quick_allreduce``,
``should_custom_ar``, ``should_use_symm_mem``) before pynccl. artune reads
exactly that code: the release's files are interpreted with
``artune.formats.pyeval`` (never imported or run), in the stand-in world of
``artune.formats.vllm.world``:

1. Each module's top level runs once per source, in the order their imports
   need (``MODULES``), so a table computed or changed by a statement after
   its literal is what the module holds, as in vLLM. What a top level cannot
   evaluate leaves its names unbound, and says why where they are used.
2. Per machine (``GpuGroup``: arch, world size, hosts, NVLink domain,
   multicast, platform) the release's own ``CudaCommunicator`` is built as
   vLLM builds its tensor-parallel group's.
3. Its ``all_reduce`` runs on an input of the reading's dtype (bf16 unless
   another is asked: the code may decide each dtype otherwise), of whole 16-byte rows (a hidden
   state) whose sizes are ``Linear``: every comparison the code makes with
   them records where its answer can flip, so the answer is asked once
   between each two such sizes, until no new one appears
   (``ReleaseCode.outcome``). In graph mode the stream
   reports capturing and ``CustomAllreduce.capture()`` is entered, as vLLM's
   graph capture does.

What the evaluator cannot follow does not stop the reading: each place is
told (``Met``), with the function, file and line, what was met there and
what was assumed (a condition false, a statement without effect), and the
machines where it was met; ``artune.formats.vllm.read`` turns them into
caveats. The functions that ran are the reading's evidence: their
fingerprints (``evaluated``) say whether a verified release had the same.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from artune.errors import Raised, TableError, Unsupported
from artune.formats.files import SourceFile
from artune.formats.fingerprints import Evaluated, evaluated
from artune.formats.pyeval import BoundMethod, Interpreter, Namespace, Unmodelled
from artune.formats.pyeval.values import ClassValue, Generator
from artune.formats.vllm import memo
from artune.formats.vllm.world import DTYPES, ROW, GpuGroup, Stage, StandIns, environ
from artune.sizes import MAX_SIZE

COMM = "vllm/distributed/device_communicators/"
PACKAGE = "vllm.distributed.device_communicators"
CUDA = PACKAGE + ".cuda_communicator"
PARALLEL_STATE = "vllm.distributed.parallel_state"
#: the release's modules artune evaluates, in the order their imports need them: (module, file)
MODULES: tuple[tuple[str, str], ...] = (
    ("vllm.envs", "vllm/envs.py"),
    ("vllm.distributed.parallel_state", "vllm/distributed/parallel_state.py"),
    (PACKAGE + ".pynccl_allocator", COMM + "pynccl_allocator.py"),
    (PACKAGE + ".all_reduce_utils", COMM + "all_reduce_utils.py"),
    ("vllm.compilation.collective_fusion", "vllm/compilation/collective_fusion.py"),
    ("vllm.compilation.passes.fusion.allreduce_rms_fusion", "vllm/compilation/passes/fusion/allreduce_rms_fusion.py"),
    ("vllm.config.compilation", "vllm/config/compilation.py"),
    (PACKAGE + ".symm_mem", COMM + "symm_mem.py"),
    (PACKAGE + ".custom_all_reduce", COMM + "custom_all_reduce.py"),
    (PACKAGE + ".quick_all_reduce", COMM + "quick_all_reduce.py"),
    (PACKAGE + ".aiter_custom_all_reduce", COMM + "aiter_custom_all_reduce.py"),
    (PACKAGE + ".flashinfer_all_reduce", COMM + "flashinfer_all_reduce.py"),
    (PACKAGE + ".base_device_communicator", COMM + "base_device_communicator.py"),
    (CUDA, COMM + "cuda_communicator.py"),
)
FILES = tuple(rel for _module, rel in MODULES)
MODES = ("graph", "eager")
MAX_ROUNDS = 64
MAX_PATHS = 8  # paths one call can fall through (vLLM has six)


@dataclass
class Met:
    """One place the evaluator could not follow, and every machine (``None``: loading the modules) it was met on."""

    what: Unmodelled
    machines: set[GpuGroup | None] = field(default_factory=set)


@dataclass(frozen=True)
class Decisions:
    """What vLLM does on one machine in one mode: ``pieces`` (first size, the paths that take it in vLLM's
    order) in size order, each running up to the next; or ``raises``, what it raises where building the
    communicator or its first all-reduce raises, at ``where`` ("file:line", where the evaluator knows it)."""

    pieces: tuple[tuple[int, tuple[str, ...]], ...] = ()
    raises: str = ""
    at_start: bool = False  # the raise is the communicator's construction (else its first all-reduce)
    kind: str = ""  # what the release raises (``KeyError``, ``AssertionError``), where it raises
    where: str = ""

    @property
    def raised(self) -> str:
        """The raise as the evaluator says it: ``where: what``."""
        return f"{self.where}: {self.raises}" if self.where else self.raises


class ReleaseCode:
    """One source's vLLM files, evaluated: the modules once, then each machine's communicator and dispatch."""

    def __init__(
        self,
        files: list[SourceFile],
        settings: Mapping[str, str] | None = None,
        keep: bool = True,
        dtype: str = "bfloat16",
        assume_true: frozenset[tuple[str, int]] = frozenset(),
    ) -> None:
        if dtype not in DTYPES:
            raise TableError(f"dtype {dtype!r}: vLLM's all-reduce is read for one of {', '.join(DTYPES)}")
        self.dtype = dtype  # the messages' dtype: each reading asks the code with one
        self.stage = Stage(settings=dict(settings or {}))
        self.stand_ins = StandIns(self.stage)
        self.fakes = self.stand_ins.fakes
        self.fakes["os"] = environ(self.stage)
        self.stand_ins.envs = self._env_value
        self.met: dict[tuple[str, int, str], Met] = {}
        # a reading kept from an earlier process (artune.formats.vllm.memo): its outcomes need no evaluation
        # another dtype's reading is kept apart (a name no VLLM_* variable has stands for it among the settings)
        named = {**self.stage.settings, **({"(dtype)": dtype} if dtype != "bfloat16" else {})}
        if assume_true:  # the other outcome of tests the evaluator cannot know: a reading of its own
            named["(assume true)"] = repr(sorted(assume_true))
        self._kept = memo.readings_dir() / memo.name(files, named) if keep else None
        data = memo.load(self._kept) if self._kept is not None else None
        for what, machines in memo.met(data) if data else ():
            self.met[(what.filename, what.line, what.construct)] = Met(what, set(machines))
        self._ran_before = memo.evaluated(data) if data else []
        self.stage.variables.update(memo.variables(data) if data else ())
        self.modules: dict[str, Interpreter] = {}
        self.sources: dict[str, SourceFile] = {}
        self._loading = True
        for module, rel in MODULES:
            source = _source(files, rel)
            if source is None:
                continue
            interp = Interpreter(source.text, source.path, package=module.rpartition(".")[0], objects=True)
            interp.globals.values.update({"__name__": module, "__file__": source.path})
            interp.fakes = self.fakes  # one world: each module sees what the others bound
            interp.opaque_calls = True
            interp.unmodelled = self._tell
            interp.assume_true = set(assume_true)  # by (file, line): a function may run in another's interpreter
            interp.run_module(defer=True)
            self.modules[module] = interp
            self.sources[module] = source
            self.fakes.setdefault(module, Namespace(module, interp.globals.values))
            for name, value in interp.globals.values.items():
                self.fakes.setdefault(f"{module}.{name}", value)  # the stand-ins answer the machine's questions
        self._loading = False
        self._saved = {module: _saved(interp) for module, interp in self.modules.items()}
        self.main = self.modules.get(CUDA)
        self._comms: dict[GpuGroup, Namespace | Decisions] = {}
        self._built: frozenset[str] = frozenset()  # the facts building the current communicator read
        #: each outcome read, with its machine, mode and the facts (GpuGroup fields, "mode") the reading asked
        self._outcomes: list[tuple[GpuGroup, str, frozenset[str], Decisions]] = [
            (group, mode, facts, Decisions(*kept)) for group, mode, facts, kept in (memo.outcomes(data) if data else ())
        ]
        self._saved_count = len(self._outcomes)

    def keep(self) -> None:
        """Keep what was read so far for the next process (where anything new was read)."""
        if self._kept is not None and len(self._outcomes) != self._saved_count:
            met = [(m.what, m.machines) for m in self.met.values()]
            memo.save(self._kept, self._outcomes, met, self.evaluated(), self.stage.variables)
            self._saved_count = len(self._outcomes)

    @property
    def complete(self) -> bool:
        """Whether the file holding the dispatch (``cuda_communicator.py``) is among those read."""
        return self.main is not None and isinstance(self.main.globals.values.get("CudaCommunicator"), ClassValue)

    def env(self, name: str) -> tuple[str, Any]:
        """``envs.NAME`` as vLLM computes it with no variable set but the settings given: ``("value", value)``;
        ``("absent", why)`` where ``envs.py`` was not read or defines no such variable (the release has no such
        switch); ``("unknown", why)`` where its value cannot be computed."""
        interp = self.modules.get("vllm.envs")
        if interp is None:
            return "absent", "envs.py is not among the files read"
        values = interp.globals.values
        table = values.get("environment_variables")
        hook = values.get("__getattr__")
        if name not in values and not (isinstance(table, dict) and name in table):
            return "absent", f"envs.py defines no {name}"
        try:
            if isinstance(table, dict) and name in table:
                return "value", interp.call(table[name], [], {})
            if hook is not None:
                return "value", interp.call(hook, [name], {})
        except Unsupported as err:  # the file's own error too: the default is what cannot be had
            return "unknown", str(err)
        return "value", values[name]

    def variables(self, platform: str = "cuda") -> set[str]:
        """The environment variables the dispatch read on ``platform``'s machines (building each communicator
        and its all-reduce, through ``envs.py`` or ``os``), over every machine read so far."""
        return {name for name, where in self.stage.variables if where == platform}

    def _env_value(self, name: str) -> Any:
        """``envs.NAME``'s value for a stand-in that asks it (``None`` where it cannot be had)."""
        status, value = self.env(name)
        return value if status == "value" else None

    def globals(self, module: str) -> dict[str, Any]:
        """What ``module``'s top level bound ({} when its file was not read)."""
        interp = self.modules.get(module)
        return interp.globals.values if interp is not None else {}

    # ---------------------------------------------------------------- what it cannot follow

    def _tell(self, what: Unmodelled) -> None:
        key = (what.filename, what.line, what.construct)
        found = self.met.setdefault(key, Met(what))
        found.machines.add(None if self._loading else self.stage.current)

    def _unfollowed(self, function: str, err: Unsupported, assumed: str) -> None:
        """Tell, as the interpreter's hook does, of an error no statement of the file could absorb."""
        text = str(err)
        place, _sep, reason = text.partition(": ")
        filename, _colon, line = place.rpartition(":")
        where = (filename, int(line)) if line.isdigit() else (self.sources[CUDA].path, 0)
        self._tell(Unmodelled(function, where[0], where[1], function, reason or text, assumed))

    # ---------------------------------------------------------------- one machine

    def _reset(self, machine: GpuGroup) -> None:
        """Every module as its top level left it, no call remembered, the stage on ``machine``."""
        for module, interp in self.modules.items():
            values, classes = self._saved[module]
            interp.globals.values.clear()
            interp.globals.values.update({k: _copy(v) for k, v in values.items()})
            for cls, attributes in classes:
                cls.attributes.clear()
                cls.attributes.update({k: _copy(v) for k, v in attributes.items()})
            interp._memo.clear()
            interp.steps = 0
        self.stage.look_at(machine)
        self.stage.capturing = False

    def communicator(self, machine: GpuGroup) -> Namespace | Decisions:
        """vLLM's ``CudaCommunicator`` for ``machine``'s tensor-parallel group, built as vLLM builds it; an
        ``Decisions`` that raises where building it raises."""
        if machine in self._comms:
            return self._comms[machine]
        assert self.main is not None
        self._reset(machine)
        # set at start-up from the platform (ParallelConfig.disable_custom_all_reduce): off on ROCm but MI300
        assigned = self.globals(PARALLEL_STATE).get("_ENABLE_CUSTOM_ALL_REDUCE")
        if isinstance(assigned, bool):
            self.fakes[PARALLEL_STATE + "._ENABLE_CUSTOM_ALL_REDUCE"] = (
                assigned and self.stand_ins.use_custom_allreduce()
            )
        cls = self.main.globals.values["CudaCommunicator"]
        group = self.stand_ins.group
        device = Namespace("torch.device", {"type": "cuda", "index": 0})
        self.stage.watching = True
        try:
            built: Namespace | Decisions = self.main.call(
                cls, [group], {"device": device, "device_group": group, "unique_name": "tp:0"}
            )
        except Raised as err:
            built = Decisions(raises=err.what, at_start=True, kind=err.kind, where=err.where)
        except Unsupported as err:  # what the evaluator cannot follow where no statement can be passed over
            self._unfollowed("CudaCommunicator.__init__", err, "no communicator is built: every size runs nccl")
            built = Decisions(((0, ("nccl",)),))
        finally:
            self.stage.watching = False
        self._comms = {machine: built}  # one machine at a time: module state is the machine's
        self._built = frozenset(self.stage.read)
        return built

    def ask(self, machine: GpuGroup, nbytes: int, graph: bool) -> tuple[str, ...]:
        """What ``CudaCommunicator.all_reduce`` runs for one message of ``nbytes`` bytes of the reading's dtype,
        and what it would run next were each path before declined: the paths that take the message, in the order
        vLLM asks them (what ``decide`` falls through where the catalog rules the first out: an alignment).

        The next path is found by asking again with the branch of ``all_reduce`` that launched the kernel taken
        as declined, until a kernel launches outside any branch (pynccl: the fallback)."""
        comm = self.communicator(machine)
        if isinstance(comm, Decisions):
            raise Raised(comm.kind or "RuntimeError", comm.raises, comm.where)
        assert self.main is not None
        _found, method = comm.attribute("all_reduce")
        if not isinstance(method, BoundMethod):
            raise Unsupported(f"{self.sources[CUDA].path}: CudaCommunicator has no all_reduce method")
        chain: list[str] = []
        declined: set[Any] = set()
        self.stage.watching = True
        try:
            for _path in range(MAX_PATHS):
                self.main.assume_false = declined
                name, site = self._launch(comm, method, nbytes, graph)
                chain.append(name)
                branch = next((node for function, node in site if function == method.func.name), None)
                if branch is None or branch in declined:
                    break
                declined = declined | {branch}
        finally:
            self.main.assume_false = set()
            self.stage.watching = False
        return tuple(chain)

    def _launch(self, comm: Namespace, method: BoundMethod, nbytes: int, graph: bool) -> tuple[str, Any]:
        """The first kernel one call launches, and the branches it was launched from."""
        assert self.main is not None
        stage = self.stage
        stage.ran.clear()
        stage.sites.clear()
        stage.site = lambda: tuple(self.main.taken)  # type: ignore[union-attr]
        self.main.steps = 0
        tensor = self.stand_ins.tensor(nbytes, self.stand_ins.dtypes[self.dtype])

        def call(_value: Any = None) -> Any:
            return self.main.call(method, [tensor], {})  # type: ignore[union-attr]

        stage.capturing = graph
        try:
            capture = _capture(comm) if graph else None
            if capture is not None:
                self.main.enter(capture, call)
            else:
                call()
        except Raised:
            raise
        except Unsupported as err:  # what the evaluator cannot follow where no statement can be passed over
            self._unfollowed(method.func.name, err, "the call runs what it launched so far, else nccl")
        finally:
            stage.capturing = False
        if not stage.ran:
            return "nccl", ()  # nothing launched: vLLM returned without reducing (a reading gap, told elsewhere)
        return stage.ran[0], stage.sites[0]

    def outcome(self, machine: GpuGroup, mode: str) -> Decisions:
        """The pieces ``machine`` runs in ``mode``: asked between each two sizes where a comparison the code
        made can flip, round after round until no new such size appears. A machine that agrees with one read
        before on every fact that reading asked (and its mode, where the mode was asked) has its outcome."""
        for seen, seen_mode, facts, outcome in self._outcomes:
            if all(seen_mode == mode if f == "mode" else getattr(seen, f) == getattr(machine, f) for f in facts):
                return outcome
        comm = self.communicator(machine)
        self.stage.read = set(self._built)
        if isinstance(comm, Decisions):
            found = comm
        else:
            if _capture(comm) is not None:
                self.stage.read.add("mode")  # graph capture enters the communicator's capture(): mode matters
            found = self._pieces(machine, mode)
        self._outcomes.append((machine, mode, frozenset(self.stage.read), found))
        return found

    def _pieces(self, machine: GpuGroup, mode: str) -> Decisions:
        graph = mode == "graph"
        flips = self.stage.flips
        flips.clear()
        answers: dict[int, tuple[str, ...]] = {}
        try:
            for _round in range(MAX_ROUNDS):
                todo = [rep for rep in _representatives(_cuts(flips)) if rep not in answers]
                if not todo:
                    break
                for rep in todo:
                    answers[rep] = self.ask(machine, rep, graph)
        except Raised as err:
            return Decisions(raises=err.what, kind=err.kind, where=err.where)
        pieces: list[tuple[int, tuple[str, ...]]] = []
        cuts = _cuts(flips)
        for start, rep in zip(cuts, _representatives(cuts), strict=True):
            answer = answers[rep]
            if not pieces or pieces[-1][1] != answer:
                pieces.append((start, answer))
        return Decisions(tuple(pieces))

    # ---------------------------------------------------------------- what the reading relied on

    def evaluated(self) -> list[Evaluated]:
        """Every function of the release's files that ran while reading it (machines and modules), fingerprinted,
        by its qualified name: a method by its class (``CustomAllreduce.should_custom_ar``), a function by its
        module (``flashinfer_all_reduce._resolve_fi_ar_backend``)."""
        out: dict[str, Evaluated] = {e.function: e for e in self._ran_before}
        for interp in self.modules.values():
            for (filename, name), node in interp.ran.items():
                if name == "<lambda>":
                    continue
                qualified = name if "." in name else f"{filename.rsplit('/', 1)[-1].removesuffix('.py')}.{name}"
                out.setdefault(qualified, evaluated(qualified, node, filename))
        return sorted(out.values(), key=lambda e: e.function)


def _source(files: list[SourceFile], rel: str) -> SourceFile | None:
    """The file of ``files`` that is ``rel`` of a vLLM tree; one given alone is known by its name."""
    found = next((f for f in files if f.path == rel or f.path.endswith("/" + rel)), None)
    if found is None and len(files) <= len(MODULES):
        name = rel.rsplit("/", 1)[-1]
        named = [f for f in files if f.path.rsplit("/", 1)[-1] == name]
        found = named[0] if len(named) == 1 else None
    return found


def _capture(comm: Namespace) -> Generator | None:
    """``ca_comm.capture()``: what vLLM's graph capture enters around the captured all-reduces."""
    ca = comm.values.get("ca_comm")
    if not isinstance(ca, Namespace):
        return None
    found, method = ca.attribute("capture")
    if not found or not isinstance(method, BoundMethod) or not method.func.context:
        return None
    return Generator(method.func, (ca,), {})


def _saved(interp: Interpreter) -> tuple[dict[str, Any], list[tuple[ClassValue, dict[str, Any]]]]:
    values = {k: _copy(v) for k, v in interp.globals.values.items()}
    classes = [(v, dict(v.attributes)) for v in values.values() if isinstance(v, ClassValue)]
    return values, classes


def _copy(value: Any) -> Any:
    """A fresh container for each machine (a module's registry, a cache); anything else as it is."""
    if type(value) in (dict, list, set):
        return type(value)(value)
    return value


def _cuts(flips: set[float]) -> list[int]:
    """Every size from 0 where a recorded comparison can change its answer: ``floor``, ``floor + 1`` and
    ``ceil`` of each flip (``n <= v`` and ``v <= n`` change there)."""
    out = {0}
    for v in flips:
        if 0 <= v < MAX_SIZE and math.isfinite(v):
            out.update((math.floor(v), math.floor(v) + 1, math.ceil(v)))
    return sorted(out)


def _representatives(cuts: list[int]) -> Iterator[int]:
    """The size each piece is asked at: its first whole number of rows (``ROW`` bytes), a message vLLM can be
    given; a piece holding none (between two cuts inside one row) is asked at its first size, the input
    standing for whole rows there too. Either way a size's alignment is left to the catalog's rules."""
    for index, start in enumerate(cuts):
        end = cuts[index + 1] - 1 if index + 1 < len(cuts) else None
        rows = max(ROW, -(-start // ROW) * ROW)
        yield rows if end is None or rows <= end else max(start, 1)


__all__ = ["FILES", "MODULES", "Decisions", "GpuGroup", "Met", "ReleaseCode"]
