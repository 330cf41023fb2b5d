"""The evaluator on the Python an engine's communicators are written in (``Interpreter(objects=True)``): classes
with bases and ``super()``, ``try``/``with``/``del``, context managers, f-strings, slices, ``getattr``; values
from outside the files that nothing stands in for (``Opaque``); and sizes that record where a comparison flips
(``Linear``). The code below is written for these tests."""

from __future__ import annotations

import ast
from fractions import Fraction

import pytest

from artune.errors import OutsideCall, Raised, Unsupported
from artune.formats.pyeval import Interpreter, Namespace, Native, Unmodelled
from artune.formats.pyeval.values import ClassValue, Linear, Opaque, Scope

BASES = """
from contextlib import contextmanager
import outside

class Base:
    LIMIT = 8 * 1024

    def __init__(self, group, max_size=LIMIT):
        self.group = group
        self.max_size = max_size
        self.disabled = True

    def admits(self, n):
        return not self.disabled and n < self.max_size


class Comm(Base):
    _SIZES = [2, 4, 8]

    def __init__(self, group, world_size):
        super().__init__(group)
        if world_size not in Comm._SIZES:
            return
        try:
            self.handle = outside.rendezvous(group)
        except RuntimeError as err:
            self.error = f"failed: {err}"
            return
        finally:
            self.tried = True
        self.disabled = False

    @property
    def twice(self):
        return 2 * self.max_size

    @contextmanager
    def capture(self):
        try:
            self.capturing = True
            yield self.max_size
        finally:
            self.capturing = False

    def run(self, n):
        with self.capture() as limit:
            seen = self.capturing
        return seen, limit, self.capturing, self.admits(n)
"""


def _eval(interp: Interpreter, text: str, **names: object) -> object:
    return interp.eval(ast.parse(text, mode="eval").body, Scope(dict(names), interp.globals))


def _interp(source: str, fakes: dict | None = None) -> Interpreter:
    interp = Interpreter(source, "comm.py", fakes=fakes, objects=True)
    interp.run_module()
    return interp


def test_classes_with_bases_build_instances_and_super_runs_the_base() -> None:
    fail = {"outside.rendezvous": Native(lambda group: Namespace("handle"), "rendezvous")}
    interp = _interp(BASES, fail)
    comm = interp.globals.values["Comm"]
    assert isinstance(comm, ClassValue) and [c.name for c in comm.mro()] == ["Comm", "Base"]
    me = interp.call(comm, [Namespace("group"), 4], {})
    assert me.values["max_size"] == 8192 and me.values["disabled"] is False and me.values["tried"] is True
    assert _eval(interp, "me.twice", me=me) == 16384  # a property is read, not bound
    assert interp.call(_eval(interp, "me.run", me=me), [100], {}) == (True, 8192, False, True)
    off = interp.call(comm, [Namespace("group"), 3], {})
    assert off.values["disabled"] is True and "tried" not in off.values


def test_a_handler_runs_for_what_a_stand_in_raises_and_finally_always() -> None:
    def refuse(group: object) -> None:
        raise Raised("RuntimeError", "rendezvous: no peer memory")

    interp = _interp(BASES, {"outside.rendezvous": Native(refuse, "rendezvous")})
    me = interp.call(interp.globals.values["Comm"], [Namespace("group"), 2], {})
    assert me.values["disabled"] is True and me.values["tried"] is True
    assert me.values["error"].startswith("failed: RuntimeError(")

    def key(group: object) -> None:
        raise Raised("KeyError", "no such key")

    interp = _interp(BASES, {"outside.rendezvous": Native(key, "rendezvous")})
    with pytest.raises(Raised, match="no such key"):  # RuntimeError does not catch a KeyError
        interp.call(interp.globals.values["Comm"], [Namespace("group"), 2], {})


def test_an_outside_call_is_opaque_and_only_a_decision_on_it_fails() -> None:
    source = (
        "import outside\n"
        "def f(n):\n"
        "    x = outside.probe(n)\n"
        "    y = x.attr[3] * 2 + 1\n"
        "    text = f'{y} at {n:>4}'\n"
        "    if n > 4:\n"
        "        return text\n"
        "    return y is None\n"
    )
    interp = _interp(source)
    with pytest.raises(OutsideCall):
        interp.call(interp.globals.values["f"], [8], {})  # without opaque_calls: an error, as before
    interp.opaque_calls = True
    assert interp.call(interp.globals.values["f"], [8], {}).endswith(" at    8")
    with pytest.raises(Unsupported, match=r"comm.py:8: comparison with an opaque value"):
        interp.call(interp.globals.values["f"], [2], {})
    opaque = Opaque("x")
    assert opaque != 1 and opaque in [opaque]  # Python's own bookkeeping: itself only (the file's compare fails)


def test_linear_sizes_record_where_each_comparison_flips() -> None:
    source = (
        "def pick(inp, limit):\n"
        "    tokens = inp.numel()\n"
        "    size = tokens * inp.element_size()\n"
        "    if size % 16 != 0:\n"
        "        return 'unaligned'\n"
        "    if tokens > limit // 2:\n"
        "        return 'big'\n"
        "    return 'small' if size + 64 <= limit else 'mid'\n"
    )
    interp = _interp(source)
    flips: set[float] = set()
    inp = Namespace(
        "tensor",
        {
            "numel": Native(lambda: Linear(512, Fraction(1, 2), 0, flips), "numel"),
            "element_size": Native(lambda: 2, "element_size"),
        },
    )
    assert interp.call(interp.globals.values["pick"], [inp, 4096], {}) == "small"
    assert flips == {4096.0, 4032.0}  # tokens > 2048 at 4096 bytes; size + 64 <= 4096 at 4032 bytes
    assert Linear(10, 1, 0, flips) % 3 == 1 and type(Linear(10) % 3) is int


def test_reading_goes_on_and_says_what_it_could_not_follow_at_a_decision() -> None:
    source = "import outside\ndef f(n):\n    if outside.ready():\n        return 'fast'\n    return 'slow'\n"
    interp = _interp(source)
    interp.opaque_calls = True
    met: list[Unmodelled] = []
    interp.unmodelled = met.append
    assert interp.call(interp.globals.values["f"], [1], {}) == "slow"
    assert [(m.line, m.construct, m.assumed) for m in met] == [(3, "if outside.ready():", "the condition is false")]


def test_a_deferred_top_level_names_why_a_name_is_unbound_and_tells_of_a_changed_table() -> None:
    source = (
        "import outside\n"
        "TABLE = {'9.0': 1}\n"
        "HELPER = outside.thing.compute() + 1\n"
        "TABLE['10.0'] = TABLE['9.0'] * unknown_name\n"
        "TABLE['10.3'] = 2\n"
        "def f():\n    return HELPER\n"
    )
    interp = Interpreter(source, "t.py", objects=True)
    met: list[Unmodelled] = []
    interp.unmodelled = met.append
    interp.run_module(defer=True)
    assert interp.globals.values["TABLE"] == {"9.0": 1, "10.3": 2}
    assert [(m.line, m.assumed) for m in met] == [(4, "the statement has no effect")]
    assert interp.call(interp.globals.values["f"], [], {}) is None
    assert met[-1].line == 7 and met[-1].assumed == "it returns None"
    assert "name 'HELPER' is not bound to a value the evaluator knows (line 3: calls 'outside.thing" in met[-1].reason


def test_relative_imports_module_getattr_slices_and_getattr() -> None:
    source = (
        "from .utils import LIMIT\n"
        "from ..envs import envs\n"
        "def f(xs):\n"
        "    return xs[1:3], envs.FLAG, getattr(envs, 'MISSING', 0), hasattr(envs, 'FLAG'), 'a:b'.split(':')[0]\n"
    )
    module = Namespace("envs", {"__getattr__": Native(lambda name: name == "FLAG", "envs.__getattr__")})
    fakes = {"pkg.sub.utils.LIMIT": 7, "pkg.envs.envs": module}
    interp = Interpreter(source, "pkg/sub/mod.py", fakes=fakes, package="pkg.sub", objects=True)
    interp.run_module()
    assert interp.globals.values["LIMIT"] == 7
    assert interp.call(interp.globals.values["f"], [[1, 2, 3, 4]], {}) == ([2, 3], True, False, True, "a")


def test_an_enum_has_members_by_name_and_by_value_and_a_bad_name_raises() -> None:
    source = (
        "from enum import Enum, auto\n"
        "class Level(Enum):\n    FP = 0\n    INT8 = 1\n    LATER = auto()\n"
        "def pick(name):\n"
        "    if name not in Level.__members__:\n        return None\n"
        "    level = Level[name]\n"
        "    return (level.value, level == Level.INT8, Level(0).name, list(Level.__members__))\n"
    )
    interp = Interpreter(source, "t.py", objects=True)
    interp.run_module()
    pick = interp.globals.values["pick"]
    assert interp.call(pick, ["INT8"], {}) == (1, True, "FP", ["FP", "INT8", "LATER"])
    assert interp.call(pick, ["LATER"], {})[0] == 2  # auto(): one above the member before
    assert interp.call(pick, ["INT3"], {}) is None
    with pytest.raises(Raised, match="no such member"):
        interp.call(interp.globals.values["Level"].values["__getitem__"], ["INT3"], {})
