"""This machine's platform and fingerprint, as measurements are labelled with them.

``platform_fingerprint()`` is what a measurement log header and the cache of
measured tables are keyed by: two machines with the same fingerprint are
expected to measure alike. The fingerprint is a short stable hash of the CPU
model, the logical CPU count, the total memory rounded to GiB, and the
platform's kind and arch; it does not change between runs or reboots, and it
does change when the VM is resized or moved to another CPU model.

The identity itself is defined once, in ``artune.machine``; this module gives
the measuring side one call that returns both halves together.
"""

from __future__ import annotations

from typing import NamedTuple

from artune import machine
from artune.table.model import Platform


class Fingerprint(NamedTuple):
    """This machine's ``Platform`` (kind "cpu", arch, CPU model) and its short stable hash."""

    platform: Platform
    digest: str


def platform_fingerprint() -> Fingerprint:
    """This machine's platform and fingerprint hash (unpackable: ``platform, digest = ...``).

    ``platform`` is ``Platform(kind="cpu", arch=platform.machine(), device=<CPU model
    name from /proc/cpuinfo>)``; ``digest`` is a 12-hex-digit hash of the CPU model,
    the logical CPU count, the total memory rounded to GiB, and kind/arch. Use the
    digest as the cache key of a measured table and to refuse mixing measurements
    from different hardware.
    """
    return Fingerprint(machine.cpu_platform(), machine.fingerprint())
