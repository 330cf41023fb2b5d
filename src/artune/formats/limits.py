"""The operating system's backstop under a reading of engine code: a child process with a time and memory limit.

The evaluators (``artune.formats.pyeval``, ``artune.formats.trtllm.evaluate``)
account for the work and the size of what they build, so a hostile file
fails at the line that asks too much. What that accounting misses the
operating system catches: ``run`` forks, and the child does the whole
command under ``RLIMIT_AS`` (``--max-memory``: MiB of address space beyond what the process held when the
reading began) and
``RLIMIT_CPU`` (``--timeout``: seconds of the reading's own CPU time, which
other work on a loaded machine does not use up), while the parent keeps a
wall-clock deadline ``WALL_FACTOR`` times as long, paused while a release is
downloaded (``paused``: the network's time is not the reading's): a reading
that waits rather than works ends too. The child tells the parent which engine file it is
reading (``reading``); when it is stopped, the parent prints one coded line
(E421) naming that file and the limit, and the command exits 2. A child
that ends any other way hands back its own exit status and output.

Where the parent's output is not a file (a test capturing it), the child's
output comes back through the same pipe and is written there.
"""

from __future__ import annotations

import contextlib
import io
import logging
import mmap
import os
import resource
import select
import signal
import struct
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

#: far above the slowest and largest reading of any release (docs/results/bounded-readings.md)
DEFAULT_TIMEOUT_S = 30.0
WALL_FACTOR = 10  # the wall-clock deadline, in timeouts: a loaded machine's CPU is shared
DEFAULT_MAX_MEMORY_MIB = 1536
CODE = "E421"  # a reading stopped at a limit, or failed inside artune

_HEADER = struct.Struct("!cI")
_channel: int | None = None  # the child's end of the pipe to its parent (None: not in a bounded child)
_current = ""  # the engine file being read, for a message in this process
_NAME_BYTES = 4096
#: where a bounded child writes the name of the file it reads (shared with the parent, which reads it once the
#: child was stopped: a child killed for its limits can send nothing then)
_shared: mmap.mmap | None = None


@dataclass(frozen=True)
class Limits:
    """How long (seconds of the reading's CPU time; ``WALL_FACTOR`` times that of wall-clock time, downloads
    aside) and how much memory (MiB of address space, beyond the process's own) a reading may take; 0 for either:
    no limit of that kind."""

    timeout_s: float = DEFAULT_TIMEOUT_S
    max_memory_mib: int = DEFAULT_MAX_MEMORY_MIB

    @property
    def none(self) -> bool:
        return not self.timeout_s and not self.max_memory_mib


def current() -> str:
    """The engine file being read in this process ("" before the first)."""
    return _current


def reading(filename: str) -> None:
    """Say that ``filename`` is being read: the name a stopped reading's error gives."""
    global _current
    if filename is _current:
        return
    _current = filename
    if _shared is not None:
        data = filename.encode("utf-8", "replace")[: _NAME_BYTES - 4]
        _shared[4 : 4 + len(data)] = data
        _shared[:4] = struct.pack("!I", len(data))  # the length last: a torn name is never read


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """The wall clock of the limit stands still inside (a download: the network's time, not the reading's)."""
    _send(b"P", "")
    try:
        yield
    finally:
        _send(b"R", "")


def _send(kind: bytes, text: str) -> None:
    if _channel is None:
        return
    data = text.encode("utf-8", "replace")
    with contextlib.suppress(OSError):  # the parent is gone: nothing to tell
        os.write(_channel, _HEADER.pack(kind, len(data)) + data)


def _has_fd(stream: object) -> bool:
    try:
        stream.fileno()  # type: ignore[attr-defined]
    except (AttributeError, ValueError, io.UnsupportedOperation):
        return False
    return True


def run(command: Callable[[], int], limits: Limits, name: str) -> int:
    """``command()``'s exit status, run in a child under ``limits``; 2 with one coded line on stderr where the
    child is stopped at a limit or dies (``name``: the sub-command, for the line). No limits: run it here."""
    if limits.none or not hasattr(os, "fork"):
        return command()
    relay = not (_has_fd(sys.stdout) and _has_fd(sys.stderr))
    sys.stdout.flush()
    sys.stderr.flush()
    read_end, write_end = os.pipe()
    shared = mmap.mmap(-1, _NAME_BYTES)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child's coverage is not collected; its behaviour is tested
        os.close(read_end)
        _child(command, limits, write_end, relay, shared)
    os.close(write_end)
    try:
        return _watch(pid, read_end, limits, name, shared)
    finally:
        os.close(read_end)
        shared.close()
        with contextlib.suppress(ChildProcessError, ProcessLookupError):
            if os.waitpid(pid, os.WNOHANG) == (0, 0):
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)


def _child(
    command: Callable[[], int], limits: Limits, channel: int, relay: bool, shared: mmap.mmap
) -> None:  # pragma: no cover
    global _channel, _shared
    _channel, _shared = channel, shared
    status = 2
    out, err = io.StringIO(), io.StringIO()
    try:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the parent ends the child; the parent does the cleanup
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches both: the parent answers it
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if limits.max_memory_mib:
            size = _address_space() + (limits.max_memory_mib << 20)
            resource.setrlimit(resource.RLIMIT_AS, (size, size))
        if limits.timeout_s:
            cpu = max(1, int(limits.timeout_s + 0.999))
            resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 2))
        if relay:
            for handler in logging.getLogger().handlers:  # what the command logs comes back with its output
                if isinstance(handler, logging.StreamHandler) and handler.stream is sys.stderr:
                    handler.setStream(err)
            sys.stdout, sys.stderr = out, err
        status = command()
    except BaseException as exc:
        with contextlib.suppress(BaseException):
            print(f"artune: error {CODE}: {failure(exc)}", file=sys.stderr)
        status = 2
    finally:
        with contextlib.suppress(BaseException):
            sys.stdout.flush()
            sys.stderr.flush()
            if relay:
                _send(b"O", out.getvalue())
                _send(b"E", err.getvalue())
        os._exit(status)


def _address_space() -> int:
    """Bytes of address space this process holds already (0 where ``/proc`` does not say): the limit is the
    reading's own, on top of it, since a caller that imported torch holds gigabytes of it before reading
    anything, and an absolute limit would then fail any reading at its first allocation."""
    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            return int(statm.read().split()[0]) * resource.getpagesize()
    except (OSError, ValueError, IndexError):
        return 0


def failure(exc: BaseException) -> str:
    """One line for an exception that ended a reading: what it was, and the engine file being read."""
    where = f"reading {_current}: " if _current else ""
    kinds = {
        MemoryError: "ran out of memory (the limit is --max-memory)",
        RecursionError: "nested too deeply to evaluate",
    }
    for kind, text in kinds.items():
        if isinstance(exc, kind):
            return f"{where}{text}; is this the engine's dispatch file?"
    detail = str(exc).splitlines()[0][:200] if str(exc) else ""
    return f"{where}artune failed inside: {type(exc).__name__}{': ' + detail if detail else ''} (please report it)"


def _watch(pid: int, channel: int, limits: Limits, name: str, shared: mmap.mmap) -> int:
    """Read the child's messages until it ends or its deadline passes; its exit status or 2."""
    clock = 0.0  # seconds of the wall-clock limit used, outside pauses
    since: float | None = time.monotonic()
    pending, out, err = b"", "", ""
    stopped = ""
    while True:
        now = time.monotonic()
        used = clock + (now - since if since is not None else 0.0)
        wall = limits.timeout_s * WALL_FACTOR
        if wall and used > wall:
            os.kill(pid, signal.SIGKILL)
            stopped = f"waited past {wall:g} s, {WALL_FACTOR} times the time limit (--timeout {limits.timeout_s:g})"
            break
        wait = wall - used + 0.05 if wall and since is not None else 1.0
        ready, _w, _x = select.select([channel], [], [], max(0.01, wait))
        if not ready:
            continue
        chunk = os.read(channel, 1 << 16)
        if not chunk:
            break
        pending += chunk
        while len(pending) >= _HEADER.size:
            kind, size = _HEADER.unpack_from(pending)
            if len(pending) < _HEADER.size + size:
                break
            text = pending[_HEADER.size : _HEADER.size + size].decode("utf-8", "replace")
            pending = pending[_HEADER.size + size :]
            if kind == b"P" and since is not None:
                clock += time.monotonic() - since
                since = None
            elif kind == b"R" and since is None:
                since = time.monotonic()
            elif kind == b"O":
                out += text
            elif kind == b"E":
                err += text
    _pid, status = os.waitpid(pid, 0)
    sys.stdout.write(out)
    sys.stderr.write(err)
    if not stopped and os.WIFEXITED(status):
        return os.WEXITSTATUS(status)
    if not stopped:
        signum = os.WTERMSIG(status)
        stopped = {
            signal.SIGXCPU: f"ran past the time limit of {limits.timeout_s:g} s of CPU time (--timeout)",
            signal.SIGKILL: f"was killed (out of memory? the limit is --max-memory {limits.max_memory_mib} MiB)",
            signal.SIGSEGV: "crashed: expressions nested too deeply to evaluate",
        }.get(signum, f"ended by signal {signal.Signals(signum).name}")
    (size,) = struct.unpack_from("!I", shared)
    filename = shared[4 : 4 + size].decode("utf-8", "replace")
    where = f"reading {filename}" if filename else "the reading"
    print(f"artune {name}: error {CODE}: {where} {stopped}; is this the engine's dispatch file?", file=sys.stderr)
    return 2
