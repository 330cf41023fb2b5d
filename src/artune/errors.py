"""The exceptions artune raises: one base class, a subclass per kind of failure.

Every message names what went wrong and how to fix it; callers can catch
``ArtuneError`` for all of them. The command line prints one line for each
and exits 2 for bad input, 3 when something it fetches from outside could
not be had (``SourceUnavailable``: retry, or use a cache). The tree:

    ArtuneError
    ├── bad input: a file, an option or an override that cannot be used as given
    │   ├── TableError                  a table file or table data is malformed
    │   │   ├── SizeError               a byte size does not parse (also a ValueError)
    │   │   └── Unsupported             engine code outside what the evaluator reads
    │   │       ├── Raised              the engine's code itself raises
    │   │       └── OutsideCall         it calls an import that nothing stands in for
    │   ├── OverrideError               an environment variable or argument (also a ValueError)
    │   ├── EvidenceError               a benchmark output file
    │   └── ReplayError                 a tuning run's log and journal
    ├── SourceUnavailable               what artune fetches or builds with is not here
    │   ├── ReleaseUnavailable          an engine release: registry unreachable, no such version
    │   └── OracleUnavailable           the tools an engine's oracle builds with (g++)
    ├── OracleGap                       an engine's own code does what its oracle does not model
    ├── ModelRefusal                    the cost model will not predict here, and says why
    ├── running a collective
    │   ├── AgreementError              ranks disagree at construction
    │   ├── CallMismatch                ranks called one collective differently
    │   ├── PeerTimeout                 a peer died or did not answer in time
    │   ├── CommunicatorClosed          closed, or broken by an earlier failure
    │   └── ShmUnavailable              shared memory cannot be used here
    └── RankFailed                      a rank of ``artune.launch.run_ranks`` failed

    Unwind                              not an error: how the evaluator of engine code carries a
                                        ``return``, ``break`` or ``continue`` out of the statements it
                                        runs; it never leaves ``artune.formats.pyeval``
    Terminated (a KeyboardInterrupt)    not an error: SIGTERM while an ``artune`` command runs, raised
                                        where it was, so that its cleanup runs as for Ctrl-C

The groups without a class name ("bad input", "running a collective") are
how the classes read, not classes to catch: catch the one you handle, or
``ArtuneError``.
"""

from __future__ import annotations


class ArtuneError(Exception):
    """Base class of every error artune raises on purpose."""


# ------------------------------------------------------------------ bad input


class TableError(ArtuneError):
    """A table file or table data is malformed (bad TOML, wrong types, bad sizes, ...)."""


class SizeError(TableError, ValueError):
    """A byte size could not be parsed (``"64KiB"``, ``"2.5MiB"`` and integers are accepted)."""


class Unsupported(TableError):
    """An engine's file uses a construct the evaluator (``artune.formats.pyeval``, or for TensorRT-LLM's C++
    ``artune.formats.trtllm.evaluate``) does not understand."""


class Raised(Unsupported):
    """The interpreted code raised (a missing dict key, a failed assert; in C++ ``throws`` or ``undefined``
    behaviour); ``kind`` names it, ``what`` says it, ``where`` is its "file:line" where known (the text reads
    ``where: what``)."""

    def __init__(self, kind: str, what: str, where: str = "") -> None:
        super().__init__(f"{where}: {what}" if where else what)
        self.kind = kind
        self.what = what
        self.where = where


class OutsideCall(Unsupported):
    """The interpreted code calls a name from outside the file (an import) that no fake stands in for.

    A reader that interprets only part of a function (the part that sizes a
    config, before the code allocates buffers) stops at this, and only this.
    ``line`` is where the call is, ``name`` what it calls.
    """

    def __init__(self, message: str, name: str, line: int | str) -> None:
        super().__init__(message)
        self.name = name
        self.line = line


class OverrideError(ArtuneError, ValueError):
    """A user override (environment variable or argument) is malformed."""


class EvidenceError(ArtuneError):
    """A benchmark output file is none of the formats artune reads, is malformed, or cannot score a table."""


class ReplayError(ArtuneError):
    """A tuning run's log and journal cannot be replayed: missing, malformed, or another sequence of calls."""


# ------------------------------------------------------------------ what comes from outside


class SourceUnavailable(ArtuneError):
    """Something artune fetches or builds with could not be had; the input itself may be fine.

    The command line exits 3 for it, not 2: retrying later, or pointing
    artune at a cache, can succeed where fixing the input would not.
    """


class ReleaseUnavailable(SourceUnavailable):
    """An engine release could not be had: the registry is unreachable, or it has no such version."""


class OracleUnavailable(SourceUnavailable):
    """An engine's oracle cannot be built here: the compiler it needs (g++) is not installed."""


class OracleGap(ArtuneError, RuntimeError):
    """An engine's own code, run as an oracle, does something the oracle does not model.

    It says what, rather than answer wrongly. It is also a ``RuntimeError``,
    the kind engine code expects of a set-up step that fails, so the engine's
    own handling of such a failure is what runs.
    """


class ModelRefusal(ArtuneError):
    """The cost model will not predict here (a world size or mode it was not fitted on), and says why."""


# ------------------------------------------------------------------ running a collective


class AgreementError(ArtuneError):
    """Ranks disagree at construction (different tables, parameters or versions)."""


class CallMismatch(ArtuneError):
    """Ranks called the same collective with different element counts, dtypes or ops.

    Raised on every rank of the call, so none of them hangs.
    """


class PeerTimeout(ArtuneError):
    """A peer rank died or did not answer within the communicator's timeout.

    ``missing`` holds the ranks that did not arrive.
    """

    def __init__(self, message: str, missing: tuple[int, ...] = ()) -> None:
        super().__init__(message)
        self.missing = missing


class CommunicatorClosed(ArtuneError):
    """The communicator was closed, or broken by an earlier peer failure."""


class ShmUnavailable(ArtuneError):
    """Shared memory cannot be used (too small a /dev/shm, other host, ...)."""


class RankFailed(ArtuneError):
    """A rank of ``artune.launch.run_ranks`` raised, died or ran past the deadline; the message holds its
    traceback."""


class Unwind(Exception):  # a signal, not an error
    """Not an error: the engine-code evaluator's ``return`` (``value``: what the function returns), or a
    ``break`` or ``continue`` on its way to its loop. Raised and caught inside ``artune.formats.pyeval``
    only; it lives here because every exception class of artune does."""

    def __init__(self, value: object) -> None:
        super().__init__()
        self.value = value


class Terminated(KeyboardInterrupt):
    """Not an error: SIGTERM while an ``artune`` command runs (``artune.cli.main``), raised where the command
    was so that its cleanup runs as for Ctrl-C: its ranks ended, its shared memory unlinked (the signal's
    default action would end the process and leave them behind). The command exits 143."""
