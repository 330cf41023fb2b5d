"""The C++ that TensorRT-LLM's all-reduce header writes its rules in, parsed into a small syntax tree.

``selectStrategyLookUpTable`` and ``getMaxRequiredWorkspaceSize`` are short
functions: declarations (``auto x = ...;``), assignments, ``if``/``else``,
``return``, and expressions of arithmetic, comparisons, ``||``/``&&``,
casts (``static_cast<T>(e)``, ``(T) e``), calls, subscripts and member
access (``m.find(k)->second``, ``t.at(i).size()``). This module parses that
subset; ``artune.formats.trtllm.evaluate`` runs it. A statement outside the
subset is kept as an ``UnknownStmt`` node with its text and line, never an
error: the evaluator reports it (a ``Caveat``) and reads on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from artune.errors import Unsupported
from artune.formats.trtllm.cxx import line_at

_TOKEN = re.compile(
    r"""(?P<space>\s+)
    |(?P<number>(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?[uUlLfF]*)
    |(?P<string>"(?:\\.|[^"\\])*")
    |(?P<name>[A-Za-z_]\w*)
    |(?P<op>::|->|<<=|>>=|<=|>=|==|!=|\|\||&&|<<|>>|\+\+|--|\+=|-=|\*=|/=|[-+*/%<>=!?:;,.(){}\[\]&|^~])""",
    re.X,
)
#: names a C-style cast ``(T) e`` may cast to: the arithmetic types and the header's enums
CAST_TYPES = frozenset(
    {"size_t", "int", "long", "unsigned", "double", "float", "bool", "int64_t", "uint64_t", "int32_t", "uint32_t"}
    | {"AllReduceStrategyType", "AllReduceFusionOp"}
)
#: words that start a declaration's type
_DECL_START = frozenset({"auto", "const", "constexpr", "static", "volatile", "std", "char"}) | CAST_TYPES


@dataclass(frozen=True)
class Token:
    """One token and its offset in the text it came from."""

    kind: str  # "number", "string", "name", "op", "end"
    text: str
    offset: int


# ------------------------------------------------------------------ expressions


@dataclass(frozen=True)
class Num:
    """A number literal: ``int`` unless it has a decimal point or an exponent."""

    value: int | float
    unsigned: bool = False


@dataclass(frozen=True)
class Str:
    """A string literal (its text without the quotes)."""

    value: str


@dataclass(frozen=True)
class Name:
    """A name, qualified or not: ``("std", "log2")``, ``("AllReduceStrategyType", "NCCL")``, ``("tp_size",)``."""

    parts: tuple[str, ...]

    @property
    def last(self) -> str:
        """The name without its qualifiers."""
        return self.parts[-1]


@dataclass(frozen=True)
class Unary:
    """``op operand`` for ``!``, ``-``, ``+``."""

    op: str
    operand: Expr


@dataclass(frozen=True)
class Binary:
    """``left op right`` (``||`` and ``&&`` short-circuit)."""

    op: str
    left: Expr
    right: Expr


@dataclass(frozen=True)
class Ternary:
    """``test ? then : other``."""

    test: Expr
    then: Expr
    other: Expr


@dataclass(frozen=True)
class Cast:
    """``static_cast<type>(operand)`` or ``(type) operand``; ``type`` is the type's last word."""

    type: str
    operand: Expr


@dataclass(frozen=True)
class Call:
    """``function(args)``: a free function (``std::log2``) or a method (``Member`` as ``function``)."""

    function: Expr
    args: tuple[Expr, ...]


@dataclass(frozen=True)
class Member:
    """``owner.name`` or ``owner->name``."""

    owner: Expr
    name: str
    arrow: bool


@dataclass(frozen=True)
class Subscript:
    """``owner[index]``."""

    owner: Expr
    index: Expr


@dataclass(frozen=True)
class Braced:
    """A braced initializer ``{a, b, ...}``."""

    items: tuple[Expr, ...]


Expr = Num | Str | Name | Unary | Binary | Ternary | Cast | Call | Member | Subscript | Braced


# ------------------------------------------------------------------ statements


@dataclass(frozen=True)
class Declare:
    """``[const] auto|TYPE name = value;`` (``names`` has more than one for ``auto [a, b] = value;``)."""

    names: tuple[str, ...]
    type: str
    value: Expr | None
    line: int
    text: str


@dataclass(frozen=True)
class Assign:
    """``name op value;`` with ``op`` one of ``=``, ``+=``, ``-=``, ``*=``, ``/=``."""

    name: str
    op: str
    value: Expr
    line: int
    text: str


@dataclass(frozen=True)
class If:
    """``if (test) then [else other]``; ``text`` is the test's."""

    test: Expr
    then: tuple[Stmt, ...]
    other: tuple[Stmt, ...]
    line: int
    text: str


@dataclass(frozen=True)
class Return:
    """``return value;``."""

    value: Expr
    line: int
    text: str


@dataclass(frozen=True)
class ExprStmt:
    """An expression statement (a call whose value is dropped)."""

    value: Expr
    line: int
    text: str


@dataclass(frozen=True)
class UnknownStmt:
    """A statement outside the subset: its text (spaces collapsed), its line and what stopped the parser."""

    line: int
    text: str
    why: str


Stmt = Declare | Assign | If | Return | ExprStmt | UnknownStmt


def tokenize(text: str, start: int = 0, end: int | None = None) -> list[Token]:
    """The tokens of ``text[start:end]`` (comments already blanked), with their offsets in ``text``."""
    end = len(text) if end is None else end
    out: list[Token] = []
    pos = start
    while pos < end:
        found = _TOKEN.match(text, pos, end)
        if found is None:
            out.append(Token("op", text[pos], pos))  # a character outside the subset: the parser will stop on it
            pos += 1
            continue
        kind = found.lastgroup or "op"
        if kind != "space":
            out.append(Token(kind, found.group(), pos))
        pos = found.end()
    out.append(Token("end", "", end))
    return out


class _Parser:
    """A recursive-descent parser over one function body's tokens."""

    def __init__(self, text: str, tokens: list[Token]) -> None:
        self.text = text
        self.tokens = tokens
        self.pos = 0

    @property
    def tok(self) -> Token:
        return self.tokens[self.pos]

    def peek(self, ahead: int = 1) -> Token:
        return self.tokens[min(self.pos + ahead, len(self.tokens) - 1)]

    def take(self, text: str | None = None) -> Token:
        tok = self.tok
        if text is not None and tok.text != text:
            raise Unsupported(f"expected {text!r}, met {tok.text or 'the end'!r}")
        self.pos += 1
        return tok

    def accept(self, text: str) -> bool:
        if self.tok.text == text and self.tok.kind in ("op", "name"):
            self.pos += 1
            return True
        return False

    def line(self, tok: Token) -> int:
        return line_at(self.text, tok.offset)

    def snippet(self, first: Token) -> str:
        """The source text from ``first`` to the current token, spaces collapsed."""
        end = self.tokens[self.pos - 1] if self.pos else first
        return " ".join(self.text[first.offset : end.offset + len(end.text)].split())

    # ---- statements

    def statements(self, closing: str = "") -> tuple[Stmt, ...]:
        out: list[Stmt] = []
        while self.tok.kind != "end" and not (closing and self.tok.text == closing):
            out.append(self.statement())
        return tuple(out)

    def statement(self) -> Stmt:
        first, start = self.tok, self.pos
        try:
            return self._statement()
        except Unsupported as err:
            self.pos = start
            self.skip_statement()
            return UnknownStmt(self.line(first), self.snippet(first), str(err))

    def skip_statement(self) -> None:
        """Past the statement at the cursor: to a ``;`` outside brackets, or past a ``{...}`` block (and any
        ``else`` block after it)."""
        depth = 0
        while self.tok.kind != "end":
            text = self.take().text
            if text in "([{":
                depth += 1
            elif text in ")]}":
                depth -= 1
                if depth <= 0 and text == "}":
                    if self.tok.text == "else":
                        continue
                    if depth < 0:
                        self.pos -= 1
                    return
            elif text == ";" and depth == 0:
                return

    def block(self) -> tuple[Stmt, ...]:
        if self.accept("{"):
            body = self.statements("}")
            self.take("}")
            return body
        return (self.statement(),)

    def _statement(self) -> Stmt:
        first = self.tok
        if first.text == "if" and first.kind == "name":
            self.take()
            self.take("(")
            test = self.expression()
            test_text = self.snippet(first).removeprefix("if").strip().removeprefix("(").strip()
            self.take(")")
            then = self.block()
            other = self.block() if self.accept("else") else ()
            return If(test, then, other, self.line(first), test_text)
        if first.text == "return" and first.kind == "name":
            self.take()
            value = self.expression()
            self.take(";")
            return Return(value, self.line(first), self.snippet(first))
        if first.text in ("{", ";"):
            raise Unsupported(f"{first.text!r} where a statement starts")
        if first.kind == "name" and self.declaration_ahead():
            return self.declaration(first)
        if first.kind == "name" and self.peek().text in ("=", "+=", "-=", "*=", "/="):
            name = self.take().text
            op = self.take().text
            value = self.expression()
            self.take(";")
            return Assign(name, op, value, self.line(first), self.snippet(first))
        value = self.expression()
        self.take(";")
        return ExprStmt(value, self.line(first), self.snippet(first))

    def declaration_ahead(self) -> bool:
        """Whether the statement at the cursor declares: ``TYPE... name =`` or ``auto [..] =``."""
        if self.tok.text not in _DECL_START:
            return False
        i = self.pos
        depth = 0
        while i < len(self.tokens) - 1:
            text = self.tokens[i].text
            if text in ("<", ">", ">>"):
                depth += {"<": 1, ">": -1, ">>": -2}[text]
            elif depth == 0 and text in ("=", "{", ";", "("):
                return (text in ("=", "{") and i > self.pos + 1) or self.tokens[i - 1].text == "]"
            elif depth == 0 and text == "[":
                return self.tokens[i - 1].text in ("auto", "const", "&")
            i += 1
        return False

    def declaration(self, first: Token) -> Declare:
        words: list[str] = []
        depth = 0
        while True:
            tok = self.tok
            if depth == 0 and tok.text == "[":
                self.take()
                names = [self.take().text]
                while self.accept(","):
                    names.append(self.take().text)
                self.take("]")
                break
            if depth == 0 and tok.kind == "name" and self.peek().text in ("=", "{", ";"):
                names = [self.take().text]
                break
            if tok.kind == "end" or (depth == 0 and tok.text in (";", "(")):
                raise Unsupported("a declaration without a name")
            depth += {"<": 1, ">": -1, ">>": -2}.get(tok.text, 0)
            words.append(self.take().text)
        value: Expr | None = None
        if self.accept("="):
            value = self.expression()
        elif self.tok.text == "{":
            value = self.primary()
        self.take(";")
        type_words = [w for w in words if w not in ("const", "constexpr", "static", "inline", "volatile", "&")]
        return Declare(tuple(names), " ".join(type_words), value, self.line(first), self.snippet(first))

    # ---- expressions, lowest precedence first

    _BINARY = (
        ("||",),
        ("&&",),
        ("|",),
        ("^",),
        ("&",),
        ("==", "!="),
        ("<", ">", "<=", ">="),
        ("<<", ">>"),
        ("+", "-"),
        ("*", "/", "%"),
    )

    def expression(self) -> Expr:
        test = self.binary(0)
        if self.accept("?"):
            then = self.expression()
            self.take(":")
            return Ternary(test, then, self.expression())
        return test

    def binary(self, level: int) -> Expr:
        if level == len(self._BINARY):
            return self.unary()
        left = self.binary(level + 1)
        while self.tok.kind == "op" and self.tok.text in self._BINARY[level]:
            op = self.take().text
            left = Binary(op, left, self.binary(level + 1))
        return left

    def unary(self) -> Expr:
        tok = self.tok
        if tok.kind == "op" and tok.text in ("!", "-", "+"):
            self.take()
            return Unary(tok.text, self.unary())
        if tok.text == "(" and self.peek().kind == "name" and self.cast_ahead():
            self.take("(")
            words = []
            while self.tok.text != ")":
                words.append(self.take().text)
            self.take(")")
            return Cast(words[-1], self.unary())
        return self.postfix(self.primary())

    def cast_ahead(self) -> bool:
        """``(T) operand``: a parenthesised arithmetic or enum type followed by something to cast."""
        i = self.pos + 1
        words = []
        while self.tokens[i].kind == "name" or self.tokens[i].text == "::":
            words.append(self.tokens[i].text)
            i += 1
        return (
            bool(words)
            and words[-1] in CAST_TYPES
            and self.tokens[i].text == ")"
            and (self.tokens[i + 1].kind in ("name", "number") or self.tokens[i + 1].text in ("(", "-", "!"))
        )

    def postfix(self, value: Expr) -> Expr:
        while True:
            if self.accept("("):
                args: list[Expr] = []
                if self.tok.text != ")":
                    args.append(self.expression())
                    while self.accept(","):
                        args.append(self.expression())
                self.take(")")
                value = Call(value, tuple(args))
            elif self.accept("["):
                index = self.expression()
                self.take("]")
                value = Subscript(value, index)
            elif self.tok.text in (".", "->"):
                arrow = self.take().text == "->"
                value = Member(value, self.take().text, arrow)
            else:
                return value

    def primary(self) -> Expr:
        tok = self.tok
        if tok.kind == "number":
            self.take()
            return _number(tok)
        if tok.kind == "string":
            self.take()
            return Str(tok.text[1:-1])
        if tok.text == "(":
            self.take()
            value = self.expression()
            self.take(")")
            return value
        if tok.text == "{":
            self.take()
            items: list[Expr] = []
            while self.tok.text != "}":
                items.append(self.expression())
                if not self.accept(","):
                    break
            self.take("}")
            return Braced(tuple(items))
        if tok.kind == "name" and tok.text in ("static_cast", "reinterpret_cast", "const_cast"):
            self.take()
            if tok.text != "static_cast":
                raise Unsupported(f"{tok.text} is outside what artune evaluates")
            self.take("<")
            words = []
            depth = 1
            while depth:
                text = self.take().text
                depth += {"<": 1, ">": -1}.get(text, 0)
                if depth:
                    words.append(text)
            self.take("(")
            operand = self.expression()
            self.take(")")
            return Cast(words[-1] if words else "", operand)
        if tok.kind == "name" or tok.text == "::":
            parts = []
            self.accept("::")
            parts.append(self.take().text)
            while self.tok.text == "::" and self.peek().kind == "name":
                self.take()
                parts.append(self.take().text)
            return Name(tuple(parts))
        raise Unsupported(f"{tok.text or 'the end'!r} where a value should be")


def _number(tok: Token) -> Num:
    text = tok.text.rstrip("uUlLfF")
    suffix = tok.text[len(text) :]
    if any(c in text for c in ".eE") or "f" in suffix.lower():
        return Num(float(text))
    return Num(int(text), unsigned="u" in suffix.lower())


def parse_body(text: str, begin: int, end: int) -> tuple[Stmt, ...]:
    """The statements of the function body ``text[begin:end]`` (comments already blanked)."""
    return _Parser(text, tokenize(text, begin, end)).statements()


def parse_expression(text: str, begin: int, end: int) -> Expr:
    """The expression ``text[begin:end]`` (an initializer); ``Unsupported`` if it is not one."""
    parser = _Parser(text, tokenize(text, begin, end))
    value = parser.expression()
    if parser.tok.kind != "end":
        raise Unsupported(f"{parser.tok.text!r} after the expression")
    return value


def collapsed(text: str) -> str:
    """``text`` with every run of whitespace one space."""
    return " ".join(text.split())


__all__ = ["Expr", "Stmt", "parse_body", "parse_expression", "tokenize"]
