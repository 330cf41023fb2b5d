"""The few C++ constructs TensorRT-LLM's all-reduce header is written in, read as text, never compiled.

The header (``cpp/tensorrt_llm/common/customAllReduceUtils.h``) holds its
tables as brace initializers of ints and its rules as a handful of short
statements. This module gives the reader what it needs to read them
exactly: the text without comments (same offsets, so every value keeps its
line), brace initializers as nested ``Brace`` nodes, function bodies split
into statements, and integer constant expressions (``16 * 1000 * 1000``).
Anything else is a ``TableError`` naming the file and line.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from artune.errors import TableError

_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_INT = re.compile(r"\d+")


def strip_comments(text: str) -> str:
    """``text`` with every comment blanked out, newlines kept: offsets and lines stay where they were."""
    return _COMMENT.sub(lambda m: re.sub(r"[^\n]", " ", m.group()), text)


def line_at(text: str, offset: int) -> int:
    """The 1-based line of ``offset`` in ``text``."""
    return text.count("\n", 0, offset) + 1


@dataclass(frozen=True)
class Brace:
    """One ``{...}`` of an initializer: its items (ints or braces) and the line it opens on."""

    items: tuple[int | Brace, ...]
    line: int

    def depth(self) -> int:
        """How many levels of braces down to the ints (1: a brace of ints)."""
        inner = [item.depth() for item in self.items if isinstance(item, Brace)]
        return 1 + (max(inner) if inner else 0)


@dataclass(frozen=True)
class CxxText:
    """A header's text, comments blanked, with its name for messages."""

    name: str
    text: str

    def error(self, offset: int, message: str) -> TableError:
        """A ``TableError`` at ``name:line`` of ``offset``."""
        return TableError(f"{self.name}:{line_at(self.text, offset)}: {message}")

    def brace(self, start: int) -> tuple[Brace, int]:
        """The initializer opening at ``start`` (a ``{``) and the offset after its ``}``; ints and braces only."""
        text = self.text
        if text[start] != "{":
            raise self.error(start, "expected '{' to open the initializer")
        items: list[int | Brace] = []
        pos = start + 1
        expect_item = True
        while pos < len(text):
            ch = text[pos]
            if ch.isspace():
                pos += 1
            elif ch == "}":
                return Brace(tuple(items), line_at(text, start)), pos + 1
            elif ch == "," and not expect_item:
                expect_item = True
                pos += 1
            elif ch == "{" and expect_item:
                inner, pos = self.brace(pos)
                items.append(inner)
                expect_item = False
            elif ch.isdigit() and expect_item:
                found = _INT.match(text, pos)
                assert found is not None
                items.append(int(found.group()))
                pos = found.end()
                expect_item = False
            else:
                raise self.error(
                    pos,
                    f"{text[pos : pos + 20].split(chr(10))[0]!r} in a table initializer: "
                    "artune reads tables of integer literals only",
                )
        raise self.error(start, "initializer not closed before the end of the file")

    def block(self, start: int) -> tuple[int, int]:
        """``(after '{', at '}')`` of the ``{...}`` block opening at ``start``, nested braces counted."""
        depth = 0
        for pos in range(start, len(self.text)):
            ch = self.text[pos]
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    return start + 1, pos
        raise self.error(start, "block not closed before the end of the file")

    def statements(self, begin: int, end: int) -> list[tuple[int, str]]:
        """The statements of a function body ``text[begin:end]``: ``(offset, text with spaces collapsed)``.

        A statement ends at ``;`` outside parentheses and braces, or at the
        ``}`` closing an ``if (...) {...}`` (an ``else`` joins it).
        """
        out: list[tuple[int, str]] = []
        pos = begin
        text = self.text
        while pos < end:
            while pos < end and text[pos].isspace():
                pos += 1
            if pos >= end:
                break
            start, depth, brace_seen = pos, 0, False
            while pos < end:
                ch = text[pos]
                if ch in "({[":
                    depth += 1
                    brace_seen |= ch == "{"
                elif ch in ")}]":
                    depth -= 1
                    if depth == 0 and ch == "}" and brace_seen and not text[pos + 1 : end].lstrip().startswith("else"):
                        pos += 1
                        break
                elif ch == ";" and depth == 0:
                    pos += 1
                    break
                pos += 1
            out.append((start, " ".join(text[start:pos].split())))
        return out


_EXPR_TOKEN = re.compile(r"^[\d\s*+\-()<]+$")
_INT_SUFFIX = re.compile(r"(\d+)(?:[uU][lL]{0,2}|[lL]{1,2}[uU]?)\b")


def int_expr(expr: str, where: str) -> int:
    """The value of an integer constant expression of literals, ``*``, ``+``, ``-``, ``<<`` and parentheses."""
    bare = _INT_SUFFIX.sub(r"\1", expr.strip())
    if not _EXPR_TOKEN.match(bare):
        raise TableError(f"{where}: {expr!r} is not an integer constant expression artune reads")
    try:
        tree = ast.parse(bare, mode="eval")
    except SyntaxError:
        raise TableError(f"{where}: {expr!r} is not an integer constant expression artune reads") from None

    def value(node: ast.AST) -> int:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return node.value
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mult, ast.Add, ast.Sub, ast.LShift)):
            a, b = value(node.left), value(node.right)
            ops = {ast.Mult: a * b, ast.Add: a + b, ast.Sub: a - b}
            return ops[type(node.op)] if type(node.op) in ops else a << b
        raise TableError(f"{where}: {expr!r} is not an integer constant expression artune reads")

    return value(tree.body)
