"""The hostile corpus: real releases' dispatch files changed as a hostile pull request could change them.

Shared by ``tests/test_hostile_corpus.py`` (every case in the suite, under
small limits) and ``bench/hostile_corpus.py`` (every case under the default
limits, each in its own process, its time and peak memory measured). Each
case copies a release's tree (vLLM 0.27.0, SGLang 0.5.23 from the releases
cache; TensorRT-LLM's headers from ``tests/fixtures/trtllm-005b299``),
changes one file, and runs ``artune check`` on the copy. A case says what
the run must print: the code and the file (``expect``, a regular expression
over stdout and stderr together) and its exit status (1: a caveat, the
reading went on; 2: the reading failed). Code that would escape writes a
marker file (``MARKER`` in the code is its path): it must not exist after
the run.
"""

from __future__ import annotations

import ast
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
TRTLLM_FIXTURE = HERE / "fixtures" / "trtllm-005b299"
VERSIONS = {"vllm": "0.27.0", "sglang": "0.5.23"}
VLLM_DIR = "vllm/distributed/device_communicators"
VLLM_CUSTOM = f"{VLLM_DIR}/custom_all_reduce.py"
VLLM_UTILS = f"{VLLM_DIR}/all_reduce_utils.py"
SGLANG_CONFIGS = "sglang/srt/distributed/device_communicators/configs/custom_all_reduce_v2.py"
TRT_HEADER = "cpp/tensorrt_llm/common/customAllReduceUtils.h"

Edit = Callable[[str], str]


@dataclass(frozen=True)
class Case:
    """One hostile change: ``edit`` applied to ``file`` of ``engine``'s tree (or ``build`` run on the tree),
    and what the run must print and exit with."""

    name: str
    engine: str
    file: str
    expect: str  # a regular expression the output must match: the code and where
    status: int  # 1: told as a caveat, the reading went on; 2: the reading failed; -1: either, coded
    edit: Edit | None = None
    build: Callable[[Path, Path], None] | None = None  # (tree, outside folder): links, FIFOs, sockets


def in_function(cls: str | None, name: str, code: str) -> Edit:
    """``code`` (lines at the function body's indentation) before the first statement of ``cls.name``."""

    def edit(text: str) -> str:
        tree = ast.parse(text)
        body = tree.body
        if cls is not None:
            body = next(n for n in body if isinstance(n, ast.ClassDef) and n.name == cls).body
        func = next(n for n in body if isinstance(n, ast.FunctionDef) and n.name == name)
        first = func.body[0]
        indent = " " * first.col_offset
        lines = text.splitlines(keepends=True)
        block = "".join(indent + line + "\n" for line in code.splitlines())
        lines.insert(first.lineno - 1, block)
        return "".join(lines)

    return edit


def at_end(code: str) -> Edit:
    """``code`` appended at the module's top level."""
    return lambda text: text + "\n" + code + "\n"


def replaced(old: str, new: str) -> Edit:
    def edit(text: str) -> str:
        assert old in text, f"{old!r} is not in the file"
        return text.replace(old, new, 1)

    return edit


# ------------------------------------------------------------------ Python payloads: bombs, loops, escapes, raises

#: (name, code, what the message says): run where a dispatch function or a table builder starts
BOMBS = (
    ("int-squared", "x = 1 << 65536\nfor _ in range(64):\n    x = x * x", "too large.*integer"),
    ("int-power", "x = 10 ** (10 ** 8)", "too large"),
    ("int-shift", "x = 1 << (1 << 40)", "too large"),
    ("round-digits", "x = round(1, -10 ** 9)", "round\\(\\) to"),
    ("sum-lists", "x = sum([[0] * 1000] * 10000, [])", "sum\\(\\) of sequences"),
    ("list-doubled", "x = [0]\nfor _ in range(64):\n    x = x + x", "too large.*list"),
    ("list-augmented", "x = [0]\nfor _ in range(64):\n    x += x", "too large.*list"),
    ("str-doubled", "s = 'ab'\nfor _ in range(64):\n    s = s + s", "too large.*string"),
    ("str-times", "s = 'a' * (10 ** 12)", "too large"),
    ("list-times", "x = [0] * (10 ** 12)", "too large"),
    ("fstring-width", "s = f'{1:1000000000}'", "format spec"),
    ("fstring-nested-width", "w = 10 ** 9\ns = f'{1:>{w}}'", "format spec"),
    ("join", "s = ','.join(['x' * 90000] * 90000)", "join\\(\\) into"),
    ("extend", "x = [0]\nfor _ in range(64):\n    x.extend(x)", "extend\\(\\) into|too large"),
    ("sorted-grown", "x = [0]\nfor _ in range(16):\n    x = x + x\ny = sorted(x * 64)", "too large"),
    ("replace", "s = 'a' * 100000\nt = s.replace('', s)", "replace\\(\\) into"),
    ("str-of-big", "x = ['a' * 100000] * 100000\ns = str(x)", "str\\(\\) of a value"),
    ("range-huge", "x = list(range(10 ** 12))", "longer than"),
    ("many-lists", "x = [[0] * 100000 for _ in range(100000)]", "gave up after building|out of memory"),
    ("dict-huge", "d = {i: i for i in range(10 ** 7)}", "longer than"),
    ("loop-nested", "for a in range(100000):\n    for b in range(100000):\n        pass", "steps|time limit"),
    ("recursion", "def f(n):\n    return f(n + 1)\nf(0)", "nested deeper|nested too deeply"),
    ("while-true", "while True:\n    pass", "unsupported construct While"),
)
ESCAPES = (
    ("open", "open('MARKER', 'w').write('x')", "'open'"),
    ("import-os", "import os\nos.system('touch MARKER')", "os.system"),
    ("dunder-import", "__import__('os').system('touch MARKER')", "__import__"),
    ("exec", "exec(\"open('MARKER', 'w')\")", "'exec'"),
    ("eval", "eval(\"open('MARKER', 'w')\")", "'eval'"),
    ("compile", "compile(\"open('MARKER', 'w')\", 'x', 'exec')", "'compile'"),
    ("subclasses", "x = ().__class__.__bases__[0].__subclasses__()", "__class__"),
    ("globals-of-lambda", "(lambda: 0).__globals__['__builtins__']['open']('MARKER', 'w')", "__globals__"),
    ("getattr-built-name", "getattr(__builtins__, 'op' + 'en')('MARKER', 'w')", "__builtins__"),
    ("getattr-of-int", "getattr(0, '__cla' + 'ss__')", "getattr\\(\\) of int"),
    ("type-call", "type('X', (object,), {'__del__': lambda s: open('MARKER', 'w')})()", "type"),
    ("globals-call", "globals()['open']('MARKER', 'w')", "'globals'"),
    ("builtins-module", "import builtins\nbuiltins.open('MARKER', 'w')", "builtins.open"),
    ("pickle", "import pickle\npickle.loads(b\"cos\\nsystem\\n(S'touch MARKER'\\ntR.\")", "pickle.loads"),
    ("ctypes", "import ctypes\nctypes.CDLL(None).system(b'touch MARKER')", "ctypes.CDLL"),
    ("subprocess", "import subprocess\nsubprocess.run(['touch', 'MARKER'])", "subprocess.run"),
    ("generator-frame", "x = (y for y in ()).gi_frame.f_back.f_globals", "gi_frame"),
    ("format-globals", "x = '{0.__class__.__init__.__globals__}'.format(0)", "format"),
    ("mro", "x = (1).__class__.__mro__", "__class__"),
    ("str-method-escape", "x = ''.__class__.__base__.__subclasses__()", "__class__"),
    ("os-environ-write", "import os\nos.environ['LD_PRELOAD'] = 'MARKER'", "environ|not a regular|item assignment"),
    ("vars", "x = vars()", "'vars'"),
    ("breakpoint", "breakpoint()", "'breakpoint'"),
    ("setattr-builtin", "setattr(__builtins__, 'len', lambda x: open('MARKER', 'w'))", "'setattr'"),
    ("del-attr", "import sys\ndel sys.modules", "sys.modules|del"),
)
RAISES = (
    ("raise", "raise RuntimeError('boom')", "RuntimeError"),
    ("assert-false", "assert False, 'no'", "AssertionError|assert"),
    ("zero-division", "x = 1 // 0", "ZeroDivisionError"),
    ("missing-key", "x = {}['nope']", "KeyError"),
)
#: classes and decorators defined where a dispatch function starts: the evaluator does not run them, it says so
DEFINITIONS = (
    (
        "metaclass",
        "class M(type):\n    def __new__(m, *a):\n        open('MARKER', 'w')\n        return type.__new__(m, *a)\n"
        "class X(metaclass=M):\n    pass\nx = X",
        "metaclass=M, which is not run",
    ),
    (
        "decorator",
        "def deco(f):\n    open('MARKER', 'w')\n    return f\n@deco\ndef g():\n    return 1\nx = g()",
        "decorator '@deco'",
    ),
)
#: at the top level of a module
MODULE_LEVEL = (
    ("module-loop", "for _a in range(100000):\n    for _b in range(100000):\n        pass", "steps|time limit"),
    ("module-int-squared", "_X = 1 << 65536\nfor _ in range(64):\n    _X = _X * _X", "too large"),
    ("module-metaclass", "class _M(type):\n    pass\nclass _Y(metaclass=_M):\n    pass", "metaclass=_M, which is not"),
    ("module-open", "open('MARKER', 'w').write('x')", "'open'"),
    ("unary-minus", "_Z = " + "-" * 200_000 + "1", "nested too deeply to parse"),
    ("parens", "_Z = " + "(" * 5000 + "1" + ")" * 5000, "nested too deeply|too many nested"),
    ("nested-lists", "_L = 1\nfor _ in range(100000):\n    _L = [_L]\nstr(_L)", "nested too deeply|steps|[Rr]ecursion"),
)


def _python_cases() -> list[Case]:
    out: list[Case] = []
    places = (
        ("vllm", VLLM_CUSTOM, "CustomAllreduce", "should_custom_ar"),
        ("sglang", SGLANG_CONFIGS, None, "_sm90_configs"),
    )
    # each payload once: every fourth in vLLM's dispatch (its reading calls it on each machine, and costs twice
    # an SGLang one), the others in SGLang's table builder
    for index, (case, code, says) in enumerate(BOMBS + ESCAPES + RAISES + DEFINITIONS):
        raises = (case, code, says) in RAISES
        engine, file, cls, func = places[0 if index % 4 == 0 or raises else 1]
        # what SGLang's table builder raises drops its arch (the "logic" change tells it): the raises go where
        # the change is told today, vLLM's dispatch
        if engine == "vllm" and ((case, code, says) in ESCAPES or raises):
            # vLLM's reader gives a call outside the files an opaque value (its dispatch calls torch): nothing is
            # called, and what is left to say is that the function differs from every release (E402)
            says += "|differs from every release"
        name = file.rsplit("/", 1)[-1]
        expect = f"{name}(:[0-9]+)?.*({says})"
        out.append(Case(f"{engine}-{case}", engine, file, expect, -1, in_function(cls, func, code)))
    for case, code, says in MODULE_LEVEL:
        for engine, file in (("vllm", VLLM_UTILS), ("sglang", SGLANG_CONFIGS)):
            name = file.rsplit("/", 1)[-1]
            out.append(Case(f"{engine}-{case}", engine, file, f"{name}.*({says})" if says else name, -1, at_end(code)))
    return out


# ------------------------------------------------------------------ TensorRT-LLM's header

_SELECT = "    auto sm_version = tensorrt_llm::common::getSMVersion();"
TRTLLM = (
    Case(
        "trtllm-unary-minus",
        "trtllm",
        TRT_HEADER,
        "customAllReduceUtils.h.*(nested|deep)",
        -1,
        replaced(_SELECT, "    auto deep = " + "-" * 200_000 + "1;\n" + _SELECT),
    ),
    Case(
        "trtllm-parens",
        "trtllm",
        TRT_HEADER,
        "customAllReduceUtils.h.*(nested|deep)",
        2,
        replaced(_SELECT, "    auto deep = " + "(" * 100_000 + "1" + ")" * 100_000 + ";\n" + _SELECT),
    ),
    Case(
        "trtllm-braces",
        "trtllm",
        TRT_HEADER,
        "customAllReduceUtils.h.*(nested|deep|table)",
        2,
        replaced("= {{    // TP=2", "= {" + "{" * 100_000 + "}" * 100_000 + ",{    // TP=2"),
    ),
    Case(
        "trtllm-huge-file",
        "trtllm",
        TRT_HEADER,
        "customAllReduceUtils.h.*bytes, more than",
        2,
        lambda text: text + "\n// " + "x" * (5 << 20) + "\n",
    ),
    Case(
        "trtllm-not-utf8", "trtllm", TRT_HEADER, "customAllReduceUtils.h.*not UTF-8", 2, lambda t: t + "\n// \udcff\n"
    ),
)


# ------------------------------------------------------------------ the tree itself: links, FIFOs, sockets, devices


def _link_out(rel: str) -> Callable[[Path, Path], None]:
    def build(tree: Path, outside: Path) -> None:
        secret = outside / "secret.py"
        secret.write_text("SECRET_TOKEN_0123 = 1\nif SECRET_TOKEN_0123:\n    pass\n")
        (tree / rel).unlink()
        (tree / rel).symlink_to(secret)

    return build


def _dotdot(rel: str) -> Callable[[Path, Path], None]:
    def build(tree: Path, outside: Path) -> None:
        secret = outside / "secret.py"
        secret.write_text("SECRET_TOKEN_0123 = 1\n")
        (tree / rel).unlink()
        hops = "/".join([".."] * (len(Path(rel).parts) - 1 + 1))
        (tree / rel).symlink_to(f"{hops}/{outside.name}/secret.py")

    return build


def _dir_out(rel: str) -> Callable[[Path, Path], None]:
    def build(tree: Path, outside: Path) -> None:
        folder = tree / Path(rel).parent
        moved = outside / "moved"
        shutil.move(str(folder), moved)
        folder.symlink_to(moved, target_is_directory=True)

    return build


def _fifo(rel: str) -> Callable[[Path, Path], None]:
    def build(tree: Path, outside: Path) -> None:
        (tree / rel).unlink()
        os.mkfifo(tree / rel)

    return build


def _socket(rel: str) -> Callable[[Path, Path], None]:
    def build(tree: Path, outside: Path) -> None:
        import socket
        import tempfile

        (tree / rel).unlink()
        short = Path(tempfile.mkdtemp(prefix="s", dir="/tmp")) / "s"  # a socket's path has at most 107 bytes
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(short))
        server.close()  # the socket file stays
        short.rename(tree / rel)
        short.parent.rmdir()

    return build


def _device(rel: str) -> Callable[[Path, Path], None]:
    def build(tree: Path, outside: Path) -> None:
        (tree / rel).unlink()
        (tree / rel).symlink_to("/dev/zero")

    return build


def _dangling(rel: str) -> Callable[[Path, Path], None]:
    def build(tree: Path, outside: Path) -> None:
        (tree / rel).unlink()
        (tree / rel).symlink_to(outside / "nothing-here.py")

    return build


def _tree_cases() -> list[Case]:
    out = []
    kinds = (
        ("symlink-out", _link_out, "resolves outside the tree"),
        ("dotdot-out", _dotdot, "resolves outside the tree"),
        ("dir-symlink-out", _dir_out, "resolves outside the tree"),
        ("fifo", _fifo, "a FIFO"),
        ("socket", _socket, "a socket"),
        ("device", _device, "resolves outside the tree|a character device"),
        ("dangling", _dangling, "a link to nothing"),
    )
    for engine, rel in (("vllm", VLLM_UTILS), ("sglang", SGLANG_CONFIGS), ("trtllm", TRT_HEADER)):
        for kind, make, says in kinds:
            # a linked folder: the first of its files that is read is refused
            name = f"{Path(rel).parent.name}/" if kind.startswith("dir") else rel.rsplit("/", 1)[-1]
            out.append(Case(f"{engine}-{kind}", engine, rel, f"E422.*{name}.*({says})", 2, build=make(rel)))
    return out


CASES: tuple[Case, ...] = (*_python_cases(), *TRTLLM, *_tree_cases())


def make_tree(case: Case, release: Path, work: Path) -> Path:
    """A copy of ``release`` with ``case`` applied, under ``work`` (beside it: ``outside``, for links)."""
    tree = work / "tree"
    outside = work / "outside"
    outside.mkdir(parents=True, exist_ok=True)
    shutil.copytree(release, tree, symlinks=True)
    if case.edit is not None:
        path = tree / case.file
        text = case.edit(path.read_text(encoding="utf-8"))
        path.write_bytes(text.encode("utf-8", "surrogateescape"))
    if case.build is not None:
        case.build(tree, outside)
    return tree


def marked(case: Case, tree: Path, marker: Path) -> Case:
    """``case`` with ``MARKER`` in its code meaning ``marker``'s path."""
    if case.edit is None:
        return case
    edit = case.edit
    return Case(
        case.name, case.engine, case.file, case.expect, case.status, lambda t: edit(t).replace("MARKER", str(marker))
    )
