"""A restricted evaluator for the Python subset that engines write their tables in.

Nothing from a checkout is imported, compiled or executed: the file is parsed
with ``ast`` and this package walks the tree itself. It knows numbers, strings,
``+ - * / // % << >>``, comparisons, ``and/or/not``, conditional expressions,
dict/list/tuple/set literals and comprehensions, names bound earlier,
``def`` and ``lambda`` (with closures), ``class X(NamedTuple)`` records (with
their methods and properties: ``Range.contains``, ``Heuristic.clip``) and a
few pure builtins (``int``, ``float``, ``min``, ``max``, ``range``, ``len``,
``isinstance``, ...). Imports bind opaque ``Symbol`` s; attributes of a
symbol are symbols (``AllReduceAlgo.ONE_SHOT_PUSH``), calling one is an
``OutsideCall`` error unless the caller registered a fake for it (``fakes``,
or a ``Native`` stand-in: how a reader answers
``torch.cuda.get_device_capability``). A reader may hand the code a
``Namespace`` as ``self`` of a class it does not build (SGLang's
communicator): the code reads and sets its attributes and calls its methods,
and ``Interpreter.run_until_outside`` runs a constructor up to the first
call outside the file. Attribute access reaches only record fields and
methods, namespaces, symbols and a few pure methods of dicts, lists, tuples
and strings (``get``, ``items``, ...; no ``format``). There is no ``while``,
no ``try``, no I/O, and step, depth and size budgets bound the work, so a
hostile file can only make the import fail, with an ``Unsupported`` error
naming the file, the line and the construct. A class body runs as Python
runs it (its attributes, its methods' defaults; ``@staticmethod`` unbound);
an opaque name has no known truth and no known type (``if symbol:`` and
``isinstance(symbol, ...)`` are ``Unsupported``), while an object a reader
hands in as a ``Namespace`` is an instance of the class it is named after.

A reader of an engine's dispatch that must read on past new code sets
``Interpreter.unmodelled``: a statement or condition the evaluator cannot
follow is then reported (``Unmodelled``: the function, file, line, construct
and what was assumed) and the run goes on as if the condition were false,
the statement absent, or the ``return`` returned ``None``.

Three modules, read in this order: ``values`` (what it computes with),
``expressions`` (``Evaluator``; its restricted mode is vLLM's constant
expressions) and ``statements`` (``Interpreter``, which runs SGLang's
configs, and ``constants``).
"""

from artune.formats.pyeval.expressions import parse
from artune.formats.pyeval.statements import Interpreter, Unmodelled, assignments, constants
from artune.formats.pyeval.values import (
    BoundMethod,
    Function,
    Namespace,
    Native,
    Record,
    RecordType,
    Symbol,
)

__all__ = [
    "BoundMethod",
    "Function",
    "Interpreter",
    "Namespace",
    "Native",
    "Record",
    "RecordType",
    "Symbol",
    "Unmodelled",
    "assignments",
    "constants",
    "parse",
]
