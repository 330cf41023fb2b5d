"""The restricted evaluator on what an engine's communicator classes and dispatch functions write: class bodies,
static methods, opaque objects, and reading on past a construct it cannot follow (``Interpreter.unmodelled``)."""

from __future__ import annotations

import pytest

from artune.errors import OutsideCall, Raised, Unsupported
from artune.formats.pyeval import Interpreter, Namespace, Native, Symbol, Unmodelled

CLASS = """
import torch
from outside import far, flag

_is_hip = False
KB = 1024


class Comm:
    _SIZES = [2, 4, 6, 8]
    _MAX = 8 * KB
    if _is_hip:
        _MAX = 16 * KB

    def __init__(self, group, device, max_size=_MAX):
        assert isinstance(device, torch.device)
        self.sizes = self._SIZES
        self.max_size = self.halve(max_size)
        self.disabled = False

    @staticmethod
    def halve(n):
        return n // 2

    def admits(self, n):
        if self.disabled:
            return False
        return n <= self.max_size
"""


def _run(source: str, fakes: dict | None = None) -> Interpreter:
    interp = Interpreter(source, "c.py", fakes=fakes)
    interp.run_module()
    return interp


def test_a_class_body_runs_in_order_and_its_defaults_are_the_class_bodys() -> None:
    interp = _run(CLASS)
    methods, attributes = interp.class_body("Comm")
    assert attributes == {"_SIZES": [2, 4, 6, 8], "_MAX": 8192}
    me = interp.instance("Comm")
    device = Namespace("torch.device")  # an opaque object of the outside class it is named after
    assert interp.call(methods["__init__"], [me, Symbol("group"), device], {}) is None
    assert me.values["sizes"] == [2, 4, 6, 8] and me.values["max_size"] == 4096  # a static method, unbound
    assert interp.call(methods["admits"], [me, 4096], {}) is True
    assert interp.call(methods["admits"], [me, 4097], {}) is False


def test_isinstance_knows_a_handed_in_object_and_refuses_to_guess_an_opaque_ones_type() -> None:
    interp = _run(CLASS)
    init = interp.class_methods("Comm")["__init__"]
    with pytest.raises(Raised, match="assert failed"):
        interp.call(init, [interp.instance("Comm"), Symbol("group"), Namespace("torch.Tensor")], {})
    with pytest.raises(Unsupported, match=r"c.py:16: isinstance of the opaque value device"):
        interp.call(init, [interp.instance("Comm"), Symbol("group"), Symbol("device")], {})


def test_the_truth_of_an_opaque_value_is_unknown_not_true() -> None:
    interp = _run("import ops\ndef f():\n    if not ops.AVAILABLE:\n        return 1\n    return 2\n")
    with pytest.raises(Unsupported, match=r"c.py:3: the truth of the opaque value ops.AVAILABLE is not known"):
        interp.call(interp.globals.values["f"], [], {})
    fakes = {"ops.AVAILABLE": True}
    interp = _run("import ops\ndef f():\n    if not ops.AVAILABLE:\n        return 1\n    return 2\n", fakes)
    assert interp.call(interp.globals.values["f"], [], {}) == 2


DISPATCH = """
from outside import flag

def pick(n):
    if flag():
        return "early"
    while n:
        n = n - 1
    total = n + 1
    if n > 4:
        return "big"
    return later(n)

def later(n):
    return n.unknown_attribute
"""


def test_with_a_hook_reading_goes_on_past_what_it_cannot_follow_and_says_what_it_assumed() -> None:
    interp = _run(DISPATCH)
    with pytest.raises(OutsideCall):
        interp.call(interp.globals.values["pick"], [8], {})  # without a hook: an error, as before
    met: list[Unmodelled] = []
    interp.unmodelled = met.append
    assert interp.call(interp.globals.values["pick"], [8], {}) == "big"
    assert [(m.function, m.line, m.construct, m.assumed) for m in met] == [
        ("pick", 5, "if flag():", "the condition is false"),
        ("pick", 7, "while n:", "the statement has no effect"),
    ]
    assert met[0].reason.startswith("calls 'outside.flag', which comes from outside the file")
    met.clear()
    assert interp.call(interp.globals.values["pick"], [2], {}) is None  # later()'s return, assumed None
    assert [(m.function, m.line, m.assumed) for m in met][-1] == ("later", 15, "it returns None")


def test_what_the_file_raises_still_propagates_with_a_hook() -> None:
    interp = _run("def f(n):\n    assert n > 0\n    return {1: 2}[n]\n")
    interp.unmodelled = lambda m: None
    with pytest.raises(Raised, match="assert failed"):
        interp.call(interp.globals.values["f"], [0], {})
    with pytest.raises(Raised, match="KeyError"):
        interp.call(interp.globals.values["f"], [5], {})


def test_a_raise_carries_its_place_apart_from_what_it_says() -> None:
    """Who reports a raise takes its file and line from ``where``, never by splitting its text."""
    interp = _run("def f(n):\n    assert n > 0\n    return {1: 2}[n]\n")
    with pytest.raises(Raised) as raised:
        interp.call(interp.globals.values["f"], [5], {})
    err = raised.value
    assert (err.kind, err.where, err.what) == ("KeyError", "c.py:3", "KeyError 5 in {1: 2}[n]")
    assert str(err) == "c.py:3: KeyError 5 in {1: 2}[n]"
    with pytest.raises(Raised) as raised:
        interp.call(interp.globals.values["f"], [0], {})
    assert raised.value.where == "c.py:2" and raised.value.what == "assert failed: n > 0"


def test_a_constructor_still_stops_at_its_first_outside_call_with_a_hook() -> None:
    source = (
        "from outside import alloc\n"
        "def init(me, n):\n    me.n = n\n    try:\n        pass\n    finally:\n        pass\n"
        "    if n > 2:\n        me.buf = alloc(n)\n    me.done = True\n"
    )
    interp = _run(source)
    met: list[Unmodelled] = []
    interp.unmodelled = met.append
    me = Namespace("me")
    assert interp.run_until_outside(interp.globals.values["init"], [me, 4]) == ("stopped", 8, "outside.alloc")
    assert me.values == {"n": 4} and [(m.function, m.line) for m in met] == [("init", 4)]
    assert interp.run_until_outside(interp.globals.values["init"], [Namespace("me"), 1]) == ("ended", None, "")


def test_a_native_stand_in_answers_where_the_file_calls_outside() -> None:
    interp = _run(DISPATCH, {"flag": Native(lambda: True, "flag")})
    assert interp.call(interp.globals.values["pick"], [8], {}) == "early"


def test_a_cached_function_answers_its_first_answer_and_a_reader_sees_what_ran_and_what_was_compared() -> None:
    source = (
        "from functools import cache\nfrom outside import count\n"
        "@cache\ndef table():\n    return {2: 64 * 1024, 4: count()}\n"
        "def pick(n, ws):\n    if n < 16 * 1024:\n        return 'small'\n"
        "    return 'big' if n <= table()[ws] else None\n"
    )
    calls: list[int] = []
    interp = _run(source, {"count": Native(lambda: calls.append(1) or 2048, "count")})
    pick = interp.globals.values["pick"]
    interp.compared = set()
    assert [interp.call(pick, [n, ws], {}) for n, ws in ((100, 2), (65536, 2), (65537, 2), (4096 * 5, 4))] == [
        "small",
        "big",
        None,
        None,
    ]
    assert calls == [1]  # table() ran once: @cache answers with what it built the first time, as Python's does
    assert {16384, 65536, 2048} <= interp.compared  # the bounds a size met, however they were computed
    assert set(interp.ran) == {("c.py", "pick"), ("c.py", "table")}


def test_a_method_decorator_the_evaluator_does_not_know_is_reported_and_the_method_read_as_written() -> None:
    interp = Interpreter("import torch\nclass C:\n    @torch.compile\n    def f(self):\n        return 1\n", "c.py")
    met: list[Unmodelled] = []
    interp.unmodelled = met.append
    interp.run_module()
    assert interp.call(interp.class_methods("C")["f"], [interp.instance("C")], {}) == 1
    assert [(m.function, m.line, m.construct, m.assumed) for m in met] == [
        ("C", 4, "@torch.compile", "it returns the method unchanged")
    ]
