"""The ``artune`` command line: one sub-command per job of the pipeline.

Exit codes: 0 success, 1 findings (``check``) or drift (``verify``), 2 bad
input (a file that cannot be read, a malformed option), 3 something fetched
from outside could not be had (an engine release while the registry is
unreachable: retry, or use a cache), 130 interrupted (Ctrl-C), 143 terminated
(SIGTERM: the command's cleanup runs as for Ctrl-C), 141 the reader closed the
pipe (``| head``). Errors are always one clear line, ``artune COMMAND: error:
...`` with the fix, never a traceback; a usage error prints the sub-command's
own usage, and a mistyped sub-command the one it most likely meant.
"""

from __future__ import annotations

import argparse
import difflib
import logging
import os
import re
import signal
import sys
from collections.abc import Sequence
from typing import Any

from artune.errors import ArtuneError, SourceUnavailable, Terminated, Unsupported

#: the exit status of an error: bad input, or what comes from outside not being here
BAD_INPUT, UNAVAILABLE = 2, 3


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every sub-command registered."""
    from artune.cli import tables

    parser = argparse.ArgumentParser(
        prog="artune",
        description="Measure, derive, check and run the fastest all-reduce for each message.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    tables.register(commands)
    from artune.cli import formats

    formats.register(commands)
    for module_name in (f"artune.cli.{name}" for name in ("measure", "tune", "costmodel", "review", "verify")):
        try:
            module = __import__(module_name, fromlist=["register"])
        except ModuleNotFoundError as err:  # a pipeline stage not installed in this build
            if err.name != module_name:
                raise
            continue
        module.register(commands)
    for name in READINGS:
        if name in commands.choices:
            _limit_arguments(commands.choices[name])
    return parser


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("artune")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "(not installed)"


def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """Each sub-command's own parser, by name."""
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def _parse(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """``parser.parse_args``, with a mistyped sub-command answered by "did you mean", and an option the
    sub-command does not have answered by that sub-command's usage, not the top level's."""
    argv = list(sys.argv[1:] if argv is None else argv)
    commands = _commands(parser)
    # the top level's options take no value: the first word that is not one is the sub-command
    word = next((w for w in argv if not w.startswith("-")), None)
    if word is not None and word not in commands:
        close = difflib.get_close_matches(word, commands, n=1)
        hint = f"did you mean {close[0]!r}?" if close else f"choose from {', '.join(commands)}"
        parser.error(f"unknown command {word!r}; {hint} (artune --help lists them)")
    args, extra = parser.parse_known_args(argv)
    if extra:
        commands[args.command].error(f"unrecognized arguments: {' '.join(extra)} (artune {args.command} --help)")
    return args


def arch_option(text: str) -> str:
    """``--arch``'s type: the arch however it is spelled (``sm_107`` is ``10.7``), an unknown one a usage error
    that lists the known ones."""
    from artune.arch import parse_arch

    try:
        return parse_arch(text)
    except ArtuneError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


#: the sub-commands that read engine code: each runs under the limits of ``artune.formats.limits``
READINGS = ("check", "explain", "show", "diff", "export", "import", "review")


def _limit_arguments(parser: argparse.ArgumentParser) -> None:
    from artune.formats import limits

    group = parser.add_argument_group("limits on reading engine code (0: no limit)")
    group.add_argument(
        "--timeout",
        type=_non_negative(float),
        default=limits.DEFAULT_TIMEOUT_S,
        metavar="SECONDS",
        help=f"stop reading engine code after this many seconds of CPU time, or {limits.WALL_FACTOR} times as many "
        f"of waiting, downloads aside (default {limits.DEFAULT_TIMEOUT_S:g})",
    )
    group.add_argument(
        "--max-memory",
        type=_non_negative(int),
        default=limits.DEFAULT_MAX_MEMORY_MIB,
        metavar="MIB",
        help=f"stop reading engine code when it needs more memory than this (default {limits.DEFAULT_MAX_MEMORY_MIB})",
    )


def _non_negative(kind: type) -> Any:
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if value < 0:
            raise argparse.ArgumentTypeError(f"{text} is negative; give 0 for no limit")
        return value

    return parse


def exit_status(err: ArtuneError) -> int:
    """3 for what could not be had from outside (``SourceUnavailable``), 2 for any other error."""
    return UNAVAILABLE if isinstance(err, SourceUnavailable) else BAD_INPUT


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    parser = build_parser()
    args = _parse(parser, argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="artune: %(levelname)s: %(message)s",
    )
    previous = _exit_on_sigterm()
    try:
        if args.command in READINGS:
            from artune.formats import limits

            bounds = limits.Limits(args.timeout, args.max_memory)
            return limits.run(lambda: _command(args, reading=True), bounds, args.command)
        return _command(args)
    except KeyboardInterrupt as err:
        terminated = isinstance(err, Terminated)
        print(f"artune {args.command}: {'terminated' if terminated else 'interrupted'}", file=sys.stderr)
        return 128 + (signal.SIGTERM if terminated else signal.SIGINT)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _command(args: argparse.Namespace, reading: bool = False) -> int:
    """The sub-command's exit status; an error is one line. A reading's unexpected failure (out of memory,
    too deep, a fault inside artune) is one coded line with exit 2, never a traceback."""
    try:
        return int(args.run(args) or 0)
    except ArtuneError as err:
        print(f"artune {args.command}: {error_text(err, reading)}", file=sys.stderr)
        return exit_status(err)
    except BrokenPipeError:  # the reader left (artune diff ... | head): the rest of the output goes nowhere
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # (and not at exit, with a traceback)
        return 128 + signal.SIGPIPE
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception as err:
        if not reading:
            raise
        from artune.formats import limits

        print(f"artune {args.command}: error {limits.CODE}: {limits.failure(err)}", file=sys.stderr)
        return BAD_INPUT


_CODED = re.compile(r"^[A-Z][0-9]{3}: ")


def error_text(err: ArtuneError, reading: bool = True) -> str:
    """``error E4xx: MESSAGE`` (``error: MESSAGE`` for an error without a code): how an error is printed."""
    return f"error{_code(err, reading)}: {_CODED.sub('', str(err), count=1)}"


def _code(err: ArtuneError, reading: bool) -> str:
    """`` E4xx`` for an error that carries its code, and for engine code a reading could not evaluate."""
    found = _CODED.match(str(err))
    if found:
        return " " + found.group(0)[:4]
    from artune.formats.files import UNREADABLE  # here: the engine readers load only when an error is printed

    return f" {UNREADABLE}" if reading and isinstance(err, Unsupported) else ""


def _terminated(signum: int, frame: object) -> None:
    raise Terminated


def _exit_on_sigterm() -> Any:
    """SIGTERM raises ``Terminated`` while a command runs; the handler it replaced (``None`` where none is
    replaced: one the embedding program set, or not the main thread)."""
    try:
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            return None
        return signal.signal(signal.SIGTERM, _terminated)
    except ValueError:  # not the main thread
        return None
