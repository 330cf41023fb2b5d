"""SGLang's communicators, interpreted: which one SGLang builds for a group, and what it runs at each size.

A release's dispatch is code, and it moves: the order of algorithms lives
in ``_pick_config`` (0.5.19 on), ``_pick_algo`` (0.5.16-0.5.18) or
``_determine_algo`` with ``should_custom_ar`` (0.5.10-0.5.15); the world
sizes in ``can_use_custom_all_reduce_v2``; the sizing in
``CustomAllReduceV2.__init__``, which clips each config to its workspace
through the config's own ``clip``. This module reads all of it with the
restricted evaluator (``artune.formats.pyeval``), never running it:

0. ``dispatch_custom_allreduce`` (``custom_all_reduce.py``) says which class
   SGLang builds for the group: v2, or the legacy ``CustomAllreduce``
   (``artune.formats.sglang.choice``), on the group's facts (world size,
   hosts, NVLink clique, NVLink or PCIe, the environment).
1. The chosen class's ``__init__`` runs, with ``self`` a ``Namespace``, on
   those facts (``artune.formats.sglang.rules.fakes``) and the environment's
   defaults (``environ.py``), up to the first statement that calls outside
   the file (allocating the workspace): what it set is the communicator as
   sized. It may instead return early (disabled for that group) or raise (a
   world size the configs lack: SGLang logs "Setup Custom allreduce failed"
   and runs NCCL).
2. The dispatch function and ``should_custom_ar`` are interpreted at every
   size where a comparison can change: the thresholds, ranges and workspace
   sizes they compare with are the only values a size is compared against,
   so the answer is constant between consecutive cut points (``cuts``).
   ``should_custom_ar`` is asked at the first 16-byte-aligned size of each
   piece (it refuses other sizes, as the catalog's alignment rule does).
   The legacy class runs one algorithm (``custom_ar_v1``): where its
   ``should_custom_ar`` admits the size.

What the evaluator cannot follow in the engine's own files (a construct
outside its subset, a call no stand-in answers, a function renamed away) is
no error: the reading records a ``Caveat`` (the function, file and line,
what it met, what artune assumed, the world sizes it was met at) and goes
on; ``Caveats`` collects them. An error is kept for a file that is not
SGLang's communicator at all.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from artune.catalog import SPECS
from artune.errors import Raised, TableError, Unsupported
from artune.formats.files import SourceFile
from artune.formats.pyeval import Function, Interpreter, Namespace, Native, Record, Symbol, Unmodelled
from artune.formats.sglang import hip
from artune.formats.sglang import rules as rules
from artune.formats.sglang.caveats import Caveats
from artune.formats.sglang.choice import GROUP, LEGACY, LEGACY_KERNEL, Choice, Chosen, device
from artune.sizes import MAX_SIZE
from artune.table.types import Band, ParamValue

CLASS = "CustomAllReduceV2"
DISPATCH = ("_pick_config", "_pick_algo", "_determine_algo")  # newest first
ADMIT = "should_custom_ar"
_HELPERS = ("_eager_plan", "_can_use_graph")  # what ADMIT calls on the way to the dispatch
ALGOS = {
    "ONE_SHOT_PUSH": "1shot_push",
    "TWO_SHOT_PUSH": "2shot_push",
    "ONE_SHOT_PULL": "1shot_pull",
    "TWO_SHOT_PULL": "2shot_pull",
}
MULTICAST = {"2shot_pull": "2shot_pull_mc"}
_SIZE_PARAMS = ("nbytes", "inp_size", "input_bytes", "size")
_TENSOR_PARAMS = ("input", "inp", "input_", "tensor")
_ROUNDS = 4  # rounds of cuts from what comparisons met (each round asks only the new pieces)
_BLOCKS = {  # the config field holding each algorithm's kernel grid
    "1shot_push": "num_push_blocks",
    "2shot_push": "num_push_blocks",
    "1shot_pull": "num_pull_blocks",
    "2shot_pull": "num_pull_blocks",
    "2shot_pull_mc": "num_mc_blocks",
}


@dataclass(frozen=True)
class Files:
    """A release's files that hold the dispatch: the communicator, its configs (0.5.16 on), the environment's
    defaults, and the module that picks v2 over the legacy communicator."""

    communicator: SourceFile
    configs: SourceFile | None = None
    environ: SourceFile | None = None
    dispatcher: SourceFile | None = None  # custom_all_reduce.py: which communicator SGLang picks
    quick: SourceFile | None = None  # quick_all_reduce.py: SGLang's QuickReduce on ROCm


@dataclass
class _State:
    """What the stand-ins answer for the call in progress: the world size, and whether a graph is captured."""

    world_size: int = 2
    graph: bool = False
    hosts: int = 1  # the hosts the ranks span
    rack: bool = False  # across hosts: one NVLink clique with a VMM-backed allocator (rules.fakes)
    nvlink: bool = True  # on one host: NVLink between every pair of GPUs (False: PCIe only)


def _tensor(nbytes: int) -> Namespace:
    """A contiguous tensor of ``nbytes`` bytes, as the communicator asks it (``numel() * element_size()``)."""
    return Namespace(
        "tensor",
        {
            "numel": Native(lambda: nbytes, "tensor.numel"),
            "element_size": Native(lambda: 1, "tensor.element_size"),
            "dtype": Symbol("torch.bfloat16"),
        },
    )


@dataclass
class Sized:
    """One world size as the chosen class's ``__init__`` left it: ``status`` "on" (sized), "off" (returned, or
    no class chosen: no custom all-reduce there) or "raises" (``error``); ``comm`` the communicator, ``written``
    its config as the file writes it; ``cls`` the class (``CLASS``, the legacy ``LEGACY``, "" for none)."""

    world_size: int
    status: str
    line: int | None
    comm: Namespace | None = None
    written: Any = None
    error: str = ""
    cls: str = CLASS
    where: str = ""  # the "file:line" of ``error``, where the evaluator knows it


@dataclass(frozen=True)
class Outcome:
    """What runs for one (world size, mode): the bands as sized and as written, and each algorithm's blocks."""

    bands: tuple[Band, ...]
    written: tuple[Band, ...]
    params: dict[str, dict[str, ParamValue]]


@dataclass
class ArchReading:
    """The communicators and their configs interpreted for one GPU (capability ``cap``, ``num_sm`` SMs);
    ``settings`` the environment variables set, as a user sets them (``env`` their values as SGLang reads them);
    ``caveats`` what the reading could not follow."""

    files: Files
    cap: tuple[int, int]
    num_sm: int | None
    env: dict[str, Any]
    state: _State = field(default_factory=_State)
    settings: Mapping[str, str] = field(default_factory=dict)
    gfx: str = ""  # an AMD GPU by gfx arch: SGLang on ROCm (is_hip() true; artune.formats.sglang.hip)

    def __post_init__(self) -> None:
        self.caveats = Caveats()
        self.at: int | None = None  # the world size being read (None: a module's top level)
        self.variables: set[str] = set()  # the environment variables the files read (``envs``, get_bool_env_var)
        envs = rules.Env(self.env, self.settings, self.variables)
        fakes = rules.fakes(self.cap, self.num_sm, self.state, envs, self.settings)
        if self.gfx:
            fakes.update(hip.fakes(self.gfx, self.state, self.settings))
        self.fakes = fakes
        self.more: list[Interpreter] = []  # other files a reading asks per size (QuickReduce's on ROCm)
        self.configs: Interpreter | None = None
        if self.files.configs is not None:
            self.configs = Interpreter(self.files.configs.text, self.files.configs.path, fakes=fakes)
            self.configs.unmodelled = self._met
            self.configs.run_module()
            for name in ("get_all_reduce_config", "get_supported_world_sizes"):
                if name in self.configs.globals.values:
                    fakes[name] = self.configs.globals.values[name]
        comm = self.files.communicator
        self.comm = Interpreter(comm.text, comm.path, fakes=fakes)
        self.comm.unmodelled = self._met
        self.comm.globals.values["__name__"] = "sglang.srt.distributed.device_communicators.custom_all_reduce_v2"
        # the module's logger and type variables call outside the file; what the dispatch needs does not
        self.comm.run_module(skip_failures=True)
        if "_is_vmm_backed_allocator" in self.comm.globals.values:
            # it asks the caching allocator (torch.empty, then the pointer's CUDA VMM kind): the machine's answer
            self.comm.globals.values["_is_vmm_backed_allocator"] = fakes["_is_vmm_backed_allocator"]
        if not _has_class(self.comm, CLASS):
            raise TableError(f"{comm.path}: no class {CLASS} here; is this SGLang's custom_all_reduce_v2.py?")
        self.methods = self.comm.class_methods(CLASS)
        self.dispatch = next((name for name in DISPATCH if name in self.methods), "")
        if not self.dispatch:
            self.unverified(
                CLASS,
                f"{CLASS} has none of {', '.join(DISPATCH)}: artune cannot tell which algorithm runs at which size",
                "it runs none (nccl at every size)",
            )
        if ADMIT not in self.methods:
            self.unverified(
                CLASS, f"{CLASS} has no {ADMIT}()", "it takes every size its dispatch picks an algorithm for"
            )
        read = (self.dispatch, ADMIT, *_HELPERS)
        self._cut_constants = _constants([self.methods[n].node for n in read if n in self.methods])
        self._legacy_constants: set[float] = set()
        self._world_sizes: tuple[int, ...] | None = None
        self.choice: Choice | None = None
        if self.files.dispatcher is not None:
            picks = {**fakes, CLASS: Symbol(CLASS)}  # the dispatch imports both from the v2 module
            if isinstance(self.comm.globals.values.get("can_use_custom_all_reduce_v2"), Function):
                picks["can_use_custom_all_reduce_v2"] = self.comm.globals.values["can_use_custom_all_reduce_v2"]
            self.choice = Choice(self.files.dispatcher, picks, self._met, self._report, hip=bool(self.gfx))
            legacy = self.choice.legacy.get("should_custom_ar")
            self._legacy_constants = _constants([legacy.node] if legacy is not None else [])

    # ---------------------------------------------------------------- what it cannot vouch for

    def _met(self, met: Unmodelled) -> None:
        self.caveats.unmodelled(met, self.at)

    def _report(self, function: str, where: str, detail: str, assumed: str) -> None:
        self.caveats.add(function, where, detail, assumed, self.at)

    def unverified(self, function: str, detail: str, assumed: str, line: int | None = None) -> None:
        """A caveat about the communicator file at ``line`` (its class's line when None)."""
        where = f"{self.files.communicator.path}:{line if line is not None else self._class_line()}"
        self._report(function, where, detail, assumed)

    def _class_line(self) -> int:
        return next((s.lineno for s in self.comm.tree.body if isinstance(s, ast.ClassDef) and s.name == CLASS), 1)

    # ---------------------------------------------------------------- configs as written

    def written_config(self, world_size: int) -> Any:
        """The config for ``world_size`` as the file writes it; ``Raised`` (a ``KeyError``) where it has none."""
        if self.configs is not None:
            func = self.configs.globals.values.get("get_all_reduce_config")
            if not isinstance(func, Function):
                raise TableError(f"{self.files.configs.path}: no get_all_reduce_config() here")  # type: ignore[union-attr]
            try:
                return self.configs.call(func, [world_size], {})
            except Raised:
                raise
            except Unsupported as err:  # a construct the hook could not step past (the budget)
                raise Raised("Unsupported", str(err)) from None
        table = self.threshold_map()
        if world_size not in table:
            raise Raised("KeyError", f"{self.files.communicator.path}: KeyError {world_size} in THRESHOLD_2_SHOT_MAP")
        return table[world_size]

    def threshold_map(self) -> dict[int, Any]:
        """0.5.10-0.5.15: ``THRESHOLD_2_SHOT_MAP`` as ``_init_config()`` / ``_maybe_init_config()`` fills it."""
        values = self.comm.globals.values
        for name in ("_maybe_init_config", "_init_config"):
            if isinstance(values.get(name), Function):
                self.comm.call(values[name], [], {})
                break
        table = values.get("THRESHOLD_2_SHOT_MAP")
        if not isinstance(table, dict) or not table:
            raise TableError(
                f"{self.files.communicator.path}: neither a configs module beside it nor THRESHOLD_2_SHOT_MAP in it: "
                "not a custom all-reduce v2 artune knows"
            )
        return table

    def identity(self) -> tuple[Any, ...]:
        """What the files give this GPU, world size by world size, whatever its SM count: the class SGLang
        picks and the config as written. Two GPUs with equal identities run the same plans (the block counts
        that follow the SM count aside)."""
        if self.num_sm is not None:
            return ArchReading(self.files, self.cap, None, self.env, settings=self.settings).identity()
        out: list[Any] = []
        for ws in self.world_sizes():
            self.state.world_size, self.at = ws, ws
            out.append(self.chosen().cls)
            try:
                out.append(self.written_config(ws))
            except Raised as err:
                out.append(err.kind)
            except TableError:
                out.append("no configs")
        return tuple(out)

    def chosen(self) -> Chosen:
        """The class SGLang builds for the group the state describes (v2 where no dispatcher is beside it)."""
        return self.choice.chosen() if self.choice is not None else Chosen(CLASS, None)

    # ---------------------------------------------------------------- __init__

    def sized(self, world_size: int) -> Sized:
        """The class SGLang picks at ``world_size`` (on the state's machine), its ``__init__`` run up to the
        first call outside the file."""
        self.state.world_size, self.at = world_size, world_size
        chosen = self.chosen()
        if chosen.cls == LEGACY:
            return self._legacy_sized(world_size)
        if chosen.cls != CLASS:
            return Sized(world_size, "off", chosen.line, cls="")
        init = self.methods.get("__init__")
        if init is None:
            self.unverified(CLASS, f"{CLASS} has no __init__", "it is off at every world size (nccl)")
            return Sized(world_size, "off", None)
        me = self.comm.instance(CLASS)
        try:
            status, line, name = self.comm.run_until_outside(init, [me, GROUP, device()])
        except Raised as err:
            return Sized(world_size, "raises", None, error=err.what, where=err.where)
        except Unsupported as err:  # what the hook cannot step over: a signature artune cannot call, the budget
            self.unverified(f"{CLASS}.__init__", f"the call ended with: {err}", "v2 is off (nccl)", init.node.lineno)
            return Sized(world_size, "off", None)
        if status == "returned":
            return Sized(world_size, "off", line)
        if "config" not in me.values:
            self.unverified(
                f"{CLASS}.__init__",
                f"calls {name} (outside the file) before it sets self.config: artune cannot tell how it sizes it",
                "v2 is off (nccl)",
                line,
            )
            return Sized(world_size, "off", line)
        rules.after_init(init.node, line, me)
        try:
            written = self.written_config(world_size)
        except Raised as err:
            return Sized(world_size, "raises", line, error=err.what, where=err.where)
        except TableError as err:  # no configs where artune looks for them
            self.unverified(f"{CLASS}.__init__", str(err), "v2 is off (nccl)", line)
            return Sized(world_size, "off", line)
        return Sized(world_size, "on", line, me, written)

    def _legacy_sized(self, world_size: int) -> Sized:
        """The legacy ``CustomAllreduce.__init__`` at ``world_size``, up to its first call outside the file."""
        assert self.choice is not None
        init = self.choice.legacy.get("__init__")
        if init is None:
            where = self.choice.where(None)
            self._report(LEGACY, where, f"no class {LEGACY} with an __init__ here", "it is off (nccl)")
            return Sized(world_size, "off", None, cls=LEGACY)
        me = self.choice.interp.instance(LEGACY)
        try:
            status, line, _name = self.choice.interp.run_until_outside(init, [me, GROUP, device()])
        except Raised as err:
            return Sized(world_size, "raises", None, error=err.what, cls=LEGACY, where=err.where)
        except Unsupported as err:
            where = self.choice.where(init.node)
            self._report(f"{LEGACY}.__init__", where, f"the call ended with: {err}", "it is off (nccl)")
            return Sized(world_size, "off", None, cls=LEGACY)
        if status == "returned":
            return Sized(world_size, "off", line, cls=LEGACY)
        rules.after_init(init.node, line, me)
        return Sized(world_size, "on", line, me, cls=LEGACY)

    # ---------------------------------------------------------------- dispatch

    def _pick(self, me: Namespace, nbytes: int, graph: bool) -> str:
        if not self.dispatch:
            return "nccl"  # no dispatch function: the caveat says so
        func = self.methods[self.dispatch]
        args: list[Any] = [me]
        for param in func.node.args.args[1:]:
            if param.arg in _SIZE_PARAMS:
                args.append(nbytes)
            elif param.arg in _TENSOR_PARAMS:
                args.append(_tensor(nbytes))
            elif param.arg == "can_use_graph":
                args.append(self._can_use_graph(me, graph))
            else:
                self.unverified(
                    f"{CLASS}.{self.dispatch}",
                    f"takes '{param.arg}', which artune does not know how to answer (it knows "
                    f"{', '.join(_SIZE_PARAMS)}, {', '.join(_TENSOR_PARAMS)} and can_use_graph)",
                    f"'{param.arg}' is an opaque value",
                    func.node.lineno,
                )
                args.append(Symbol(param.arg))
        self.state.graph = graph
        return self._algorithm(self._call(self.dispatch, args, None, "it returns None (nccl)"), func)

    def _can_use_graph(self, me: Namespace, graph: bool) -> Any:
        """What ``custom_all_reduce`` hands the dispatch as ``can_use_graph``: its ``_can_use_graph()`` (0.5.19 on:
        graph mode allowed by ``capture()``, the stream capturing), else whether the call is captured."""
        if "_can_use_graph" not in self.methods:
            return graph
        self.state.graph = graph
        me.values["_graph_mode_allowed"] = graph  # what capture() sets while a graph is captured
        return self._call("_can_use_graph", [me], graph, "it answers whether the call is captured")

    def _admits(self, me: Namespace, nbytes: int, graph: bool) -> bool:
        if ADMIT not in self.methods:
            return True  # the caveat says so
        self.state.graph = graph
        me.values["_graph_mode_allowed"] = graph  # what capture() sets while a graph is captured
        return self._truth(self._call(ADMIT, [me, _tensor(nbytes)], False, "it returns False"), f"{CLASS}.{ADMIT}")

    def _truth(self, result: Any, function: str) -> bool:
        """Whether ``GroupCoordinator``'s ``if ... should_custom_ar(input_)`` takes ``result`` as true."""
        try:
            return bool(result)
        except Unsupported as err:
            self.unverified(function, f"returned {result}: {err}", "it is false")
            return False

    def _call(self, name: str, args: list[Any], assumed: Any, saying: str) -> Any:
        """``CustomAllReduceV2.name(*args)`` interpreted; ``assumed`` (``saying`` so) where the call cannot be
        followed past what the hook steps over (the evaluation budget)."""
        func = self.methods[name]
        try:
            return self.comm.call(func, args, {})
        except Raised:
            raise
        except Unsupported as err:
            self.unverified(f"{CLASS}.{name}", f"the call ended with: {err}", saying, func.node.lineno)
            return assumed

    def _algorithm(self, result: Any, func: Function) -> str:
        """artune's name for what the dispatch returned: an ``AllReduceConfig``, ``(algo, mode)`` or an algo."""
        multicast: Any = False
        if isinstance(result, Record) and "algo" in result.type.fields:
            algo, multicast = result.get("algo"), result.get("use_multicast", False)
        elif isinstance(result, tuple) and len(result) == 2:
            algo, mode = result
            multicast = isinstance(mode, Symbol) and str(mode).rsplit(".", 1)[-1] == "MULTICAST"
        else:
            algo = result
        if algo is None:
            return "nccl"
        name = ALGOS.get(str(algo).rsplit(".", 1)[-1]) if isinstance(algo, Symbol) else None
        function = f"{CLASS}.{self.dispatch}"
        if name is None:
            self.unverified(
                function,
                f"returned {result!r}: not one of SGLang's algorithms artune knows ({', '.join(ALGOS)})",
                "nccl runs (artune has no name for it)",
                func.node.lineno,
            )
            return "nccl"
        if self._truth(multicast, function):
            if name not in MULTICAST:
                self.unverified(
                    function,
                    f"runs {name} with multicast, which artune has no name for",
                    f"{name} without multicast",
                    func.node.lineno,
                )
                return name
            name = MULTICAST[name]
        return name

    def outcome(self, sized: Sized, graph: bool) -> Outcome:
        """The bands ``sized`` runs in one mode (multicast on first, then off), and as its rows are written."""
        assert sized.comm is not None
        self.at = sized.world_size
        if sized.cls == LEGACY:
            return self._legacy_outcome(sized, graph)
        on = sized.comm
        off = _with_config(on, _no_multicast(on.values["config"]))
        if on.values.get("pull_enabled") is False:
            on = off  # _init_workspace: no pull plane, no multicast
        as_written = _with_config(on, sized.written)
        as_written_off = _with_config(on, _no_multicast(sized.written))
        cuts = self.cuts(self._cut_constants, on, sized.written)
        run_on = lambda n: self._run(on, n, graph)  # noqa: E731
        # where the config has no multicast to drop, the machine without it runs the same
        same = on.values["config"] == off.values["config"]
        bands = self._bands(cuts, run_on, run_on if same else lambda n: self._run(off, n, graph))
        pick = lambda n: self._pick(as_written, n, graph)  # noqa: E731
        same = sized.written == _no_multicast(sized.written)
        written = self._bands(cuts, pick, pick if same else lambda n: self._pick(as_written_off, n, graph))
        return Outcome(bands, written, _params((*bands, *written), on.values["config"]))  # both need blocks

    def _legacy_outcome(self, sized: Sized, graph: bool) -> Outcome:
        """What the legacy class runs: its one algorithm wherever its ``should_custom_ar`` admits the size (its
        ``custom_all_reduce`` runs the kernel in both modes: captured, or eagerly through its IPC buffer)."""
        run = self.legacy_runner(sized, graph)
        if run is None:
            return Outcome((), (), {})
        bands = self._bands(self.cuts(self._legacy_constants, sized.comm), run, run)
        return Outcome(bands, bands, {})

    def legacy_runner(self, sized: Sized, graph: bool) -> Callable[[int], str] | None:
        """The legacy class's answer per size: its kernel where its ``should_custom_ar`` admits the size, else
        nccl; None where it has no ``should_custom_ar``. On ROCm in its deterministic mode (its
        ``use_amd_deterministic_impl``, as its ``__init__`` set it) the kernel is the one-stage one."""
        assert self.choice is not None and sized.comm is not None
        choice, me = self.choice, sized.comm
        me.values["_IS_CAPTURING"] = graph  # what its capture() sets
        admit = choice.legacy.get("should_custom_ar")
        if admit is None:
            self._report(LEGACY, choice.where(None), f"{LEGACY} has no should_custom_ar()", "it takes no size (nccl)")
            return None
        function = f"{LEGACY}.should_custom_ar"
        kernel = LEGACY_KERNEL
        if self.gfx and me.values.get("use_amd_deterministic_impl") is True:
            kernel = hip.DETERMINISTIC_KERNEL

        def run(nbytes: int) -> str:
            try:
                result = choice.interp.call(admit, [me, _tensor(nbytes)], {})
            except Raised:
                raise
            except Unsupported as err:
                self._report(function, choice.where(admit.node), f"the call ended with: {err}", "it returns False")
                return "nccl"
            return kernel if self._truth(result, function) else "nccl"

        return run

    def _run(self, me: Namespace, nbytes: int, graph: bool) -> str:
        name = self._pick(me, nbytes, graph)
        if name == "nccl":
            return name  # no algorithm named: SGLang asserts rather than run custom all-reduce
        aligned = -(-nbytes // rules.ALIGN) * rules.ALIGN
        return name if self._admits(me, aligned, graph) else "nccl"

    def _answers(
        self, cuts: list[int], on: Callable[[int], str], off: Callable[[int], str]
    ) -> tuple[list[int], dict[int, tuple[str, str]]]:
        """The cut points and each piece's answer (multicast on, off) at its representative size.

        The cuts come first from the numbers written in the code and held in
        its values; every number a comparison then meets while answering
        (``nbytes < 64 * KB``, a bound computed from the world size) is a cut
        too, and the new pieces are asked in turn, a few rounds at most.
        """
        answers: dict[int, tuple[str, str]] = {}
        interps = [
            i
            for i in (self.comm, self.configs, self.choice.interp if self.choice else None, *self.more)
            if i is not None
        ]
        for _round in range(_ROUNDS):
            for interp in interps:
                interp.compared = set()
            try:
                for index, start in enumerate(cuts):
                    rep = self._rep(start, cuts[index + 1] - 1 if index + 1 < len(cuts) else None)
                    if rep not in answers:
                        first = on(rep)
                        answers[rep] = (first, first if off is on else off(rep))
                met = set().union(*(i.compared or set() for i in interps))
            finally:
                for interp in interps:
                    interp.compared = None
            more = set(self.cuts(met - set(answers))) - set(cuts)  # a size compared with itself is no bound
            if not more:
                break
            cuts = sorted(set(cuts) | more)
        return cuts, answers

    def _bands(self, cuts: list[int], on: Callable[[int], str], off: Callable[[int], str]) -> tuple[Band, ...]:
        cuts, answers = self._answers(cuts, on, off)
        pieces: list[tuple[int, tuple[str, ...]]] = []  # (first size, candidates)
        for index, start in enumerate(cuts):
            first, other = answers[self._rep(start, cuts[index + 1] - 1 if index + 1 < len(cuts) else None)]
            if first != other and not SPECS[first].conditions.multicast:
                self.unverified(
                    f"{CLASS}.{self.dispatch}",
                    f"runs {first} with multicast and {other} without at {start} bytes, and {first} is not a "
                    "multicast algorithm to artune",
                    f"{first} runs with multicast and without",
                )
                other = first
            candidates = tuple(dict.fromkeys((first, other)))
            if pieces and pieces[-1][1] == candidates:
                continue
            pieces.append((start, candidates))
        bands = [
            Band(pieces[i + 1][0] - 1 if i + 1 < len(pieces) else None, candidates)
            for i, (_start, candidates) in enumerate(pieces)
        ]
        while bands and bands[-1].candidates == ("nccl",):
            bands.pop()  # above the last custom band the plan's fallback runs: nccl
        return tuple(bands)

    @staticmethod
    def _rep(start: int, end: int | None) -> int:
        """The size a piece is asked at: its first 16-byte-aligned one when it has one (the only sizes SGLang's
        custom all-reduce takes), else its first."""
        aligned = -(-start // rules.ALIGN) * rules.ALIGN
        return aligned if end is None or aligned <= end else start

    @staticmethod
    def cuts(constants: set[float], *values: Any) -> list[int]:
        """Every size where a comparison of the dispatch can change, from 0: for each number ``v`` it may
        compare a size with (``constants`` written in its code, and those ``values`` hold), ``floor(v)``,
        ``floor(v) + 1`` and ``ceil(v)`` (``n <= v`` and ``v <= n`` flip there)."""
        numbers = set(constants)
        for value in values:
            _numbers(value, numbers, 0)
        out = {0}
        for v in numbers:
            if v < 0 or not math.isfinite(v) or v >= MAX_SIZE:
                continue  # no size is asked above artune's largest (INF = 1 << 60 stands for "no bound")
            out.update((math.floor(v), math.floor(v) + 1, math.ceil(v)))
        return sorted(out)

    def supported(self) -> list[Sized]:
        """``sized`` for every world size SGLang may be asked for."""
        return [self.sized(ws) for ws in self.world_sizes()]

    def world_sizes(self) -> tuple[int, ...]:
        """The world sizes asked: 2-16, and every one the files name as supported (the configs' world sizes,
        ``get_supported_world_sizes()``, the legacy class's ``_SUPPORTED_WORLD_SIZES``), so that a release
        taking 32 ranks is read at 32."""
        if self._world_sizes is None:
            named: set[Any] = set()
            supported = self.comm.fakes.get("get_supported_world_sizes")
            if isinstance(supported, Function) and self.configs is not None:
                named.update(self._quietly(lambda: self.configs.call(supported, [], {})))  # type: ignore[union-attr]
            table = self.comm.globals.values.get("THRESHOLD_2_SHOT_MAP")
            named.update(table if isinstance(table, dict) else ())
            if self.choice is not None and self.choice.legacy:
                legacy = self.choice.interp.instance(LEGACY).class_values.get("_SUPPORTED_WORLD_SIZES")
                named.update(legacy if isinstance(legacy, (list, tuple)) else ())
            extra = {ws for ws in named if isinstance(ws, int) and not isinstance(ws, bool) and 1 < ws <= 1024}
            self._world_sizes = tuple(sorted(set(rules.WORLD_SIZES) | extra))
        return self._world_sizes

    def _quietly(self, ask: Callable[[], Any]) -> Any:
        """``ask()`` where a failure only means the files name no world sizes that way."""
        try:
            found = ask()
        except Unsupported:
            return ()
        return found if isinstance(found, (list, tuple, set, dict)) else ()


def _has_class(interp: Interpreter, name: str) -> bool:
    return any(isinstance(s, ast.ClassDef) and s.name == name for s in interp.tree.body)


def _constants(nodes: Iterable[ast.AST]) -> set[float]:
    """The numbers written in the dispatch's own code (``nbytes <= 64 * MB`` would compare with one)."""
    out: set[float] = set()
    for node in nodes:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Constant) and type(sub.value) in (int, float) and 0 <= sub.value < 1 << 62:
                out.add(sub.value)
    return out


def _numbers(value: Any, out: set[float], depth: int) -> None:
    """Every number ``value`` holds (a config's thresholds and ranges, a communicator's sizes)."""
    if depth > 6:
        return
    if type(value) in (int, float):
        out.add(value)
    elif isinstance(value, Record):
        for item in value.values:
            _numbers(item, out, depth + 1)
    elif isinstance(value, Namespace):
        for item in value.values.values():
            _numbers(item, out, depth + 1)
    elif isinstance(value, (tuple, list)):
        for item in value:
            _numbers(item, out, depth + 1)


def _no_multicast(config: Any) -> Any:
    """The config as ``_init_workspace`` leaves it where the symmetric memory has no multicast address."""
    if isinstance(config, Record) and "num_mc_blocks" in config.type.fields:
        return config.replace([], {"num_mc_blocks": None})
    return config  # 0.5.10-0.5.15: no multicast path at all


def _with_config(me: Namespace, config: Any) -> Namespace:
    return Namespace(me.name, {**me.values, "config": config}, me.methods)


def block_value(value: Any) -> ParamValue | None:
    """A block count as a parameter: a number, or the SM-count expression (or any other value) as text
    (``"min(192,sms)"``)."""
    if value is None or isinstance(value, (int, float, str, bool)):
        return value
    return str(value)


def _params(bands: tuple[Band, ...], config: Any) -> dict[str, dict[str, ParamValue]]:
    used = dict.fromkeys(name for band in bands for name in band.candidates if name in _BLOCKS)
    out: dict[str, dict[str, ParamValue]] = {}
    for name in used:
        if isinstance(config, Record) and _BLOCKS[name] in config.type.fields:
            value = block_value(config.get(_BLOCKS[name]))
        else:
            value = rules.DEFAULT_BLOCKS  # 0.5.10-0.5.15: the kernel's own grid
        if value is not None:
            out[name] = {"blocks": value}
    return out


__all__ = ["ArchReading", "Files", "Outcome", "Sized", "block_value"]
