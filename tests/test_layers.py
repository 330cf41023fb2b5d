"""The package's layering, read from the source: every import, lazy ones inside functions included."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


def _modules() -> dict[str, Path]:
    out = {}
    for path in SRC.joinpath("artune").rglob("*.py"):
        parts = path.relative_to(SRC).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


MODULES = _modules()


def _imports(name: str) -> set[str]:
    """The artune modules ``name`` imports anywhere in its file."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, *([node.module] if node.module else [])])
            found.add(base)
            found |= {f"{base}.{a.name}" for a in node.names}
    return {m for m in found if m in MODULES and m != name}


GRAPH = {name: _imports(name) for name in MODULES}


def _cycle_through(start: str, graph: dict[str, set[str]]) -> list[str] | None:
    """A path of imports from ``start`` back to itself, if there is one."""
    stack, seen = [(start, [start])], set()
    while stack:
        node, path = stack.pop()
        for nxt in graph.get(node, ()):
            if nxt == start:
                return [*path, start]
            if nxt not in seen:
                seen.add(nxt)
                stack.append((nxt, [*path, nxt]))
    return None


def test_no_module_imports_itself_back() -> None:
    """A package's ``__init__`` re-exporting its modules is not a circle; a module importing back its importer is."""
    packages = {m for m, p in MODULES.items() if p.name == "__init__.py"}
    graph = {m: deps - packages for m, deps in GRAPH.items() if m not in packages}
    circles = [c for m in sorted(graph) if (c := _cycle_through(m, graph))]
    assert not circles, "import circles: " + "; ".join(" -> ".join(c) for c in circles)


def test_the_table_model_is_a_leaf() -> None:
    assert GRAPH["artune.table.types"] <= {"artune.errors", "artune.platforms", "artune.sizes"}


#: the low layer: what the runtime and the engine analysis both build on (the table layer included)
LOW = (
    "errors",
    "sizes",
    "platforms",
    "_version",
    "grid",
    "findings",
    "settings",
    "machine",
    "gpufacts",
    "rocm",
    "catalog",
)


def test_the_low_layer_imports_no_layer_above_it() -> None:
    """The machine's identity, the GPU facts and the vocabulary sit below the table model: the platform they
    report is ``artune.platforms``' leaf, not the table model's."""
    low = {f"artune.{m}" for m in LOW}
    found = sorted(
        f"{m} -> {dep}" for m in low for dep in GRAPH[m] | _named_by_string(m) if dep not in low | {"artune"}
    )
    assert not found, "the low layer imports a layer above it: " + "; ".join(found)


def _names_from_the_root(source: str) -> set[str]:
    """What ``source`` takes from the package root ``artune`` that is not a module of it (``from artune import
    __version__``; ``import artune`` alone, for its attributes)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module == "artune" and not node.level:
            found |= {a.name for a in node.names if f"artune.{a.name}" not in MODULES}
        elif isinstance(node, ast.Import):
            found |= {"artune" for a in node.names if a.name == "artune"}
    return found


def test_no_module_takes_a_name_from_the_package_root() -> None:
    """The root's ``__init__`` re-exports and registers the torch backend, so a module it imports (directly or
    not) that takes a name from it back reads a half-initialised package: a cycle. What modules need from
    the root has a leaf of its own (``artune._version``, ``artune.errors``)."""
    found = {m for m, path in MODULES.items() if m != "artune" and _names_from_the_root(path.read_text("utf-8"))}
    assert not found, f"modules taking names from the package root: {sorted(found)}"


def test_the_root_name_check_sees_what_it_forbids() -> None:
    assert _names_from_the_root("from artune import __version__, machine\nimport artune.table") == {"__version__"}
    assert _names_from_the_root("import artune\nfrom artune._version import __version__") == {"artune"}


def test_algorithms_never_import_tune_report_or_cli() -> None:
    upward = {
        (m, dep)
        for m, deps in GRAPH.items()
        if m.startswith("artune.algorithms")
        for dep in deps
        if f"{dep}.".startswith(("artune.tune.", "artune.report.", "artune.cli."))
    }
    assert not upward


#: what sits above ``artune.table``: the table layer imports none of it
ABOVE_TABLE = (
    "formats",
    "oracles",
    "costmodel",
    "evidence",
    "sources",
    "tune",
    "review",
    "report",
    "cli",
    "communicator",
    "algorithms",
    "measure",
    "backend",
)
#: the command line: ``artune.cli`` and ``python -m artune``, which only starts it
CLI = ("cli", "__main__")


def _in(module: str, packages: tuple[str, ...]) -> bool:
    """``module`` is one of ``artune.<package>`` or inside one."""
    return any(f"{module}.".startswith(f"artune.{p}.") for p in packages)


def _named_by_string(name: str, source: str | None = None) -> set[str]:
    """The artune modules ``name`` (its file, or ``source``) names in a string constant: an import by name
    (``importlib.import_module``)."""
    tree = ast.parse(source if source is not None else MODULES[name].read_text(encoding="utf-8"))
    named = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    return {m for m in named if m in MODULES and m != name}


def _upward(lower: tuple[str, ...] | None, above: tuple[str, ...]) -> list[str]:
    """``module -> dependency`` for every import from a module in ``lower`` (None: any module not in
    ``above``) into one in ``above``, string imports included."""
    return sorted(
        f"{m} -> {dep}"
        for m, deps in GRAPH.items()
        if (_in(m, lower) if lower is not None else not _in(m, above))
        for dep in deps | _named_by_string(m)
        if _in(dep, above)
    )


def test_the_library_never_imports_the_cli() -> None:
    """The command line is the top layer: what it offers the library (table sources, ...) belongs below it."""
    assert not _upward(None, CLI), "the library imports the CLI: " + "; ".join(_upward(None, CLI))


def test_the_table_layer_imports_nothing_above_it() -> None:
    """``artune.table`` is the low layer: the engines' formats, the model, the tuner, the Communicator and the
    rest build on it, so it imports none of them, not even by name."""
    found = _upward(("table",), ABOVE_TABLE)
    assert not found, "artune.table imports a layer above it: " + "; ".join(found)


#: the two towers. The runtime measures, decides and runs all-reduces; the engine analysis reads, scores and
#: reviews the engines' tables. Below both sits the low layer they share (errors, sizes, catalog, findings,
#: grid, settings, machine, gpufacts); the command line sits on top of both.
RUNTIME = ("table", "algorithms", "communicator", "backend", "measure", "tune", "launch", "report")
ANALYSIS = ("formats", "evidence", "costmodel", "review", "sources", "oracles")
#: what the analysis may read of the runtime: the table layer, the measurement log's records and the pure
#: statistics of numbers (one geometric mean for the whole house)
RUNTIME_FOR_ANALYSIS = ("artune.table", "artune.measure.records", "artune.measure.stats")


def test_the_runtime_never_imports_the_engine_analysis() -> None:
    """A Communicator on a serving host needs none of the engines' readers, the cost model or the review."""
    found = _upward(RUNTIME, ANALYSIS)
    assert not found, "the runtime imports the engine analysis: " + "; ".join(found)


def _crossing_into_runtime(graph: dict[str, set[str]]) -> list[str]:
    """``module -> dependency`` for every import from the analysis into the runtime beyond what it may read."""
    return sorted(
        f"{m} -> {dep}"
        for m, deps in graph.items()
        if _in(m, ANALYSIS)
        for dep in deps
        if _in(dep, RUNTIME) and not any(dep == r or dep.startswith(f"{r}.") for r in RUNTIME_FOR_ANALYSIS)
    )


def test_the_analysis_reads_the_runtime_only_through_the_table_and_the_records() -> None:
    """The engine analysis reads tables and measurement records; deriving, timing and running stay below it."""
    graph = {m: deps | _named_by_string(m) for m, deps in GRAPH.items()}
    found = _crossing_into_runtime(graph)
    assert not found, "the analysis reaches into the runtime: " + "; ".join(found)


def _own_oracle(crossing: str) -> bool:
    """``artune.formats.E -> artune.oracles.E``: an engine's ``EnginePlugin`` loading its own oracle, which only
    ``verify-engine`` calls (``artune.oracles.verify.oracle``)."""
    module, _, dep = crossing.partition(" -> ")
    return module.startswith("artune.formats.") and dep == "artune.oracles." + module.removeprefix("artune.formats.")


def test_only_the_command_line_runs_an_engine_s_code() -> None:
    """``artune.oracles`` executes the engines' own code; ``check``, ``explain`` and ``review`` never do, so
    nothing in the library but the command line (``artune verify-engine``) imports it, not even by name; an
    engine's ``EnginePlugin`` names its own, loaded by ``verify-engine`` alone."""
    found = _upward(None, ("oracles", *CLI))
    found = [
        f
        for f in found
        if not f.split(" -> ")[0].startswith("artune.oracles") and "oracles" in f and not _own_oracle(f)
    ]
    assert not found, "the library imports the oracles: " + "; ".join(found)


def test_the_tower_checks_see_a_crossing_import() -> None:
    """The tower checks fail on the imports they forbid, as read from a module's source."""
    assert _in("artune.tune.derive", RUNTIME) and _in("artune.costmodel.plan", ANALYSIS)
    fake = {"artune.formats.trtllm.generator": {"artune.tune.derive", "artune.table.types", "artune.measure.records"}}
    assert _crossing_into_runtime(fake) == ["artune.formats.trtllm.generator -> artune.tune.derive"]
    assert "artune.tune.derive" in _named_by_string("artune.tune.x", 'import_module("artune.tune.derive")')


def test_the_layer_checks_see_what_they_forbid() -> None:
    """The two checks above see the imports they forbid: the layers by name, the CLI's entry, a string import."""
    assert _in("artune.cli.tables", CLI) and _in("artune.__main__", CLI) and not _in("artune.catalog", CLI)
    assert _in("artune.formats.vllm", ABOVE_TABLE) and not _in("artune.table.types", ABOVE_TABLE)
    assert "artune.cli" in GRAPH["artune.__main__"]
    assert _named_by_string("artune.table.rules", 'import_module("artune.catalog")') == {"artune.catalog"}


def test_the_reader_sees_lazy_and_relative_imports() -> None:
    """The checks above are only as good as the import reader: it must see what a function imports late."""
    assert "artune.measure.cuda_timing" in GRAPH["artune.measure.harness"]
    assert "artune.costmodel.hardware" in GRAPH["artune.review.regret"]  # imported inside a function
    assert _cycle_through("a", {"a": {"b"}, "b": {"a"}}) == ["a", "b", "a"]


def test_no_class_name_is_defined_twice() -> None:
    """One concept, one name: a class name names one class in the whole package."""
    homes: dict[str, list[str]] = {}
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                homes.setdefault(node.name, []).append(name)
    assert not {c: m for c, m in homes.items() if len(m) > 1}


def _exception_classes(sources: dict[str, str]) -> list[tuple[str, str]]:
    """``(module, class)`` for every class in ``sources`` (module -> text) that derives, through any chain of
    classes defined there, from a built-in exception."""
    import builtins

    known = {n for n, v in vars(builtins).items() if isinstance(v, type) and issubclass(v, BaseException)}
    classes = [
        (module, node)
        for module, text in sources.items()
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.ClassDef)
    ]
    found: dict[tuple[str, str], None] = {}
    grew = True
    while grew:  # a class deriving from one found derives from an exception too
        grew = False
        for module, node in classes:
            bases = {b.attr if isinstance(b, ast.Attribute) else getattr(b, "id", "") for b in node.bases}
            if bases & known and (module, node.name) not in found:
                found[(module, node.name)] = None
                known.add(node.name)
                grew = True
    return sorted(found)


def test_every_exception_class_lives_in_errors() -> None:
    """One home for errors: ``artune.errors`` draws the tree, and a new error is added there, in it (the
    evaluator's control-flow signal ``Unwind`` too: no exception is exempt)."""
    sources = {name: path.read_text(encoding="utf-8") for name, path in MODULES.items()}
    found = [c for c in _exception_classes(sources) if c[0] != "artune.errors"]
    assert not found, "exception classes outside artune.errors: " + "; ".join(".".join(c) for c in found)


def test_the_exception_check_sees_a_class_outside_errors() -> None:
    fake = {
        "artune.errors": "class ArtuneError(Exception): ...\nclass TableError(ArtuneError): ...",
        "artune.x": "import artune.errors as e\nclass Bad(e.TableError): ...\nclass Worse(Bad): ...\nclass Fine: ...",
        "artune.y": "def f():\n    class Local(RuntimeError): ...",
    }
    assert [c for c in _exception_classes(fake) if c[0] != "artune.errors"] == [
        ("artune.x", "Bad"),
        ("artune.x", "Worse"),
        ("artune.y", "Local"),
    ]


#: the words a family of algorithms goes by (the catalog's schemes and the names they had before, in prose
#: too), alone or as the first part of a kernel name (``one_shot/custom``)
FAMILY_WORDS = frozenset({"one_shot", "two_shot", "multicast", "library", "ring", "multimem", "nccl"})


def _vocabulary_maps(source: str, names: frozenset[str], kernels: frozenset[str]) -> list[int]:
    """The lines of ``source`` where a literal maps algorithm names to families or kernels (or back), or a
    family-named constant lists algorithm names: the catalog's vocabulary written out again."""

    def family(value: object) -> bool:
        return isinstance(value, str) and value.split("/")[0].replace("-", "_") in FAMILY_WORDS

    def text(node: ast.AST | None) -> object:
        return node.value if isinstance(node, ast.Constant) else None

    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Dict):
            pairs = [(text(k), text(v)) for k, v in zip(node.keys, node.values, strict=True)]
            forward = [k for k, v in pairs if k in names | kernels and (family(v) or (v in kernels and v != k))]
            backward = [k for k, v in pairs if family(k) and v in names]
            if len(forward) >= 2 or len(backward) >= 2:
                found.append(node.lineno)
        elif isinstance(node, ast.Assign) and isinstance(node.value, (ast.Tuple, ast.List, ast.Set)):
            targets = [t.id for t in node.targets if isinstance(t, ast.Name)]
            listed = [e for e in node.value.elts if text(e) in names]
            if any(family(t.lower()) for t in targets) and len(listed) >= 2:
                found.append(node.lineno)
    return found


def test_the_algorithm_vocabulary_has_one_home() -> None:
    """Which family an algorithm belongs to and which kernels it runs is said once, in ``artune.catalog``;
    every other module derives what it needs from there (``scheme_of``, ``KERNELS``)."""
    from artune import catalog

    names, kernels = frozenset(catalog.SPECS), frozenset(catalog.KERNELS)
    found = [
        f"{name}:{line}"
        for name, path in MODULES.items()
        if name != "artune.catalog"
        for line in _vocabulary_maps(path.read_text(encoding="utf-8"), names, kernels)
    ]
    assert not found, "maps of algorithm names to families or kernels outside artune.catalog: " + "; ".join(found)
    assert all(spec.kernels or spec.name == "hier_shm" for spec in catalog.SPECS.values())
    assert len(catalog.KERNELS) == sum(len(spec.kernels) for spec in catalog.SPECS.values())  # one owner each


def test_the_vocabulary_check_sees_a_map_written_again() -> None:
    names, kernels = frozenset({"1shot_push", "2shot_pull", "nccl"}), frozenset({"sglang/1shot_push", "nccl"})
    forms = 'FORM_OF = {"1shot_push": "one_shot", "2shot_pull": "two_shot", "gloo": "ring"}'
    gpu = 'KERNEL_OF = {\n"1shot_push": "one_shot/custom",\n"nccl": "nccl/auto"}'
    back = '_NAME = {"one_shot": "1shot_push", "ring": "nccl"}'
    ran = 'RAN = {"1shot_push": "sglang/1shot_push", "nccl": "nccl", "2shot_pull": "sglang/1shot_push"}'
    model = 'MODEL = {"sglang/1shot_push": "one_shot/custom", "nccl": "nccl/auto"}'
    grouped = 'ONE_SHOT = ("1shot_push", "2shot_pull")'
    params = 'PARAMS = {"1shot_push": {"blocks": 8}, "2shot_pull": {"blocks": 8}}\nALGOS = ("1shot_push", "nccl")'
    assert [_vocabulary_maps(s, names, kernels) for s in (forms, gpu, back, ran, model, grouped, params)] == [
        [1],
        [1],
        [1],
        [1],
        [1],
        [1],
        [],
    ]


#: what a regular expression does with a text (``re.search(P, x)``, ``PATTERN.sub(r, x)``)
_PATTERN_CALLS = frozenset({"search", "match", "fullmatch", "findall", "finditer", "sub", "subn", "split"})
#: what takes a text apart
_TEXT_CALLS = frozenset(
    {"split", "rsplit", "partition", "rpartition", "startswith", "endswith", "find", "rfind", "index", "rindex"}
    | {"count", "removeprefix", "removesuffix", "splitlines"}
)


def _reads_message(node: ast.AST) -> bool:
    """Whether ``node`` is, or is made from, a ``.message`` (a finding's, or a question's made from one)."""
    return any(isinstance(n, ast.Attribute) and n.attr == "message" for n in ast.walk(node))


def _message_parses(source: str) -> list[int]:
    """The lines of ``source`` that read data back out of a ``.message``: a regular expression over it, a
    string method that takes it apart, or ``... in X.message`` (a membership test over a set of messages is
    no parse, and neither is a message written from another: an f-string, ``replace(f, message=...)``)."""
    out: list[int] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            args = [*node.args, *(k.value for k in node.keywords)]
            pattern = node.func.attr in _PATTERN_CALLS and any(_reads_message(a) for a in args)
            if pattern or (node.func.attr in _TEXT_CALLS and _reads_message(node.func.value)):
                out.append(node.lineno)
        elif isinstance(node, ast.Compare) and any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops):
            texts = [c for c in node.comparators if not isinstance(c, (ast.Set, ast.SetComp, ast.List, ast.ListComp))]
            if any(_reads_message(c) for c in texts):
                out.append(node.lineno)
    return sorted(set(out))


def test_no_module_parses_a_finding_back_from_its_text() -> None:
    """A finding carries its data as fields (``Finding.world_sizes``, ``code``, ``arch``, ``source``): whoever
    acts on it reads the field, never the prose the producer wrote for a person."""
    found = [
        f"{path.relative_to(SRC)}:{line}"
        for path in SRC.joinpath("artune").rglob("*.py")
        for line in _message_parses(path.read_text(encoding="utf-8"))
    ]
    assert not found, f"a finding's text parsed back (read a field of the finding instead): {found}"


def test_the_message_check_sees_what_it_forbids() -> None:
    source = """
sizes = re.search(r"at world sizes? ([\\d, ]+):", f.message)
data = _DATA.findall(_FILE.sub("", rename(finding.message)))
where, _, what = found.message.partition(": ")
named = [a for a in asked if f"`{a.switch}` set" in question.message]
first = q.message.split(";")[0]
kept = [f for f in found if f.message in seen]
said = f"{f.message}; except at world sizes 4"
again = replace(f, message=f"{f.message} (for float16 messages)")
known = {f.message for f in found}
"""
    assert _message_parses(source) == [2, 3, 4, 5, 6]


#: the engines' names as code writes them (``nccl`` is also an algorithm's name, so NCCL's tuner plugin goes by
#: ``nccl-tuner``)
ENGINE_WORDS = ("vllm", "sglang", "trtllm")
ENGINE_STRINGS = frozenset({*ENGINE_WORDS, "nccl-tuner"})
#: where naming an engine is the point: the registry, and an engine's own files (any part of the module's name
#: is the engine's: ``formats/vllm/``, ``oracles/sglang.py``, ``evidence/trtllm_csv.py``, ``algorithms/engines/
#: vllm.py``)
ENGINE_HOMES = ("artune.formats.registry",)


def _engine_home(module: str) -> bool:
    return module in ENGINE_HOMES or any(
        part.startswith((*ENGINE_WORDS, "nccl")) for part in module.removeprefix("artune.").split(".")
    )


def _names_an_engine(source: str) -> list[str]:
    """What in ``source`` names an engine: an import of an engine's module, an identifier with an engine's
    name in it, or a string that is an engine's name or a table source of one (``"vllm"``, ``"vllm:"``,
    ``"vllm=="``). Prose (a docstring, a message) is not a name."""
    found = []
    for node in ast.walk(ast.parse(source)):
        words: list[str] = []
        if isinstance(node, ast.Import):
            words = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            words = [node.module or "", *(a.name for a in node.names), *(a.asname or "" for a in node.names)]
        elif isinstance(node, ast.Name):
            words = [node.id]
        elif isinstance(node, ast.Attribute):
            words = [node.attr]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            words = [node.name]
        elif isinstance(node, ast.arg):
            words = [node.arg]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            value = node.value
            source_of = (
                value.startswith(tuple(f"{e}{s}" for e in ENGINE_WORDS for s in (":", "=="))) and " " not in value
            )
            if value in ENGINE_STRINGS or source_of:
                found.append(repr(value))
            continue
        found += [w for w in words if any(e in w.lower() for e in ENGINE_WORDS)]
    return found


#: the modules that still name an engine outside its folder and the registry, each to be taught to ask the
#: engine's ``EnginePlugin`` instead (issue #52). The list only shrinks: a module that stops naming an engine
#: must leave it, and one not on it must not start.
STILL_NAMING_AN_ENGINE = frozenset(
    {
        # the runtime: its kernels and algorithm names are the engines' (the catalog's vocabulary, by design)
        "artune.algorithms.engines",
        "artune.catalog",
        "artune.table.gaps",  # the engines' gap policies: the table layer's half of #52 item 2
        "artune.tune.shapes",  # TensorRT-LLM's shape tables tuned
        # the cost model's published sweeps, by engine
        "artune.costmodel.blind",
        "artune.costmodel.calibrate",
        "artune.costmodel.validate",
        # the command line: explain's vLLM kernel, ROCm switches and both-outcomes notes; tune's CSV
        "artune.cli.tables",
        "artune.cli.tune",
        # the evidence: benchmark readers by format, the knob search of vLLM's rows
        "artune.evidence.best",
        "artune.evidence.read",
        # the review: benchmark commands, switches, causes, the evidence's formats
        "artune.review.benchmarks",
        "artune.review.causes",
        "artune.review.evidence",
        "artune.review.markdown",
        "artune.review.switches",
    }
)


def _naming_an_engine() -> dict[str, list[str]]:
    return {
        name: found
        for name, path in MODULES.items()
        if not _engine_home(name) and (found := _names_an_engine(path.read_text(encoding="utf-8")))
    }


def test_only_the_engines_folders_and_the_registry_name_an_engine() -> None:
    """A fourth engine is one folder and one registry line: no other module picks an engine by its name."""
    found = _naming_an_engine()
    new = {m: names for m, names in found.items() if m not in STILL_NAMING_AN_ENGINE}
    assert not new, "modules naming an engine (ask its EnginePlugin instead): " + "; ".join(
        f"{m}: {', '.join(sorted(set(n)))}" for m, n in sorted(new.items())
    )
    left = sorted(STILL_NAMING_AN_ENGINE - found.keys())
    assert not left, f"no longer naming an engine: take them off STILL_NAMING_AN_ENGINE: {left}"


def test_the_engine_name_check_sees_what_it_forbids() -> None:
    assert _names_an_engine('if args.to == "vllm":\n    pass') == ["'vllm'"]
    assert _names_an_engine("from artune.formats.sglang.write import export_sglang") == [
        "artune.formats.sglang.write",
        "export_sglang",
    ]
    assert _names_an_engine("import artune.formats.trtllm") == ["artune.formats.trtllm"]
    assert _names_an_engine('spec.startswith(("vllm:", "vllm=="))') == ["'vllm:'", "'vllm=='"]
    assert _names_an_engine("def _vllm_kernel(table): return table.rules") == ["_vllm_kernel"]
    assert _names_an_engine('"""vLLM and SGLang in prose."""\nx = f"{engine} reads"') == []
    assert _names_an_engine('TARGETS = ("nccl-tuner",)\nALGORITHMS = ("nccl",)') == ["'nccl-tuner'"]
    assert _engine_home("artune.formats.vllm.read") and _engine_home("artune.oracles.sglang")
    assert _engine_home("artune.evidence.trtllm_csv") and _engine_home("artune.formats.registry")
    assert not _engine_home("artune.cli.formats") and not _engine_home("artune.review.benchmarks")
