"""Which plan a call uses: ``graph`` while its CUDA stream is capturing a graph, else the Communicator's mode.

Engines capture decode steps in CUDA graphs and run prefill eagerly, and the
best algorithm differs between the two (a graph has no launch gaps), so
tables hold a plan per mode. Inside a capture nothing may wait for the host
or talk to peers, so the Communicator agrees on a call the first time it
sees it outside a capture and, at that moment, also binds the graph-mode
route; during a capture it only looks that route up (``route_key``).
"""

from __future__ import annotations

import torch

from artune.table.types import Mode


def capturing(tensor: torch.Tensor) -> bool:
    """True while ``tensor``'s CUDA stream is capturing a graph; CPU tensors never are (and CUDA is not asked)."""
    return tensor.is_cuda and _stream_capturing()


# torch.cuda.is_current_stream_capturing without its Python wrapper (the same C function); a CPU-only torch
# has no CUDA tensors, so its placeholder is never called
_stream_capturing = torch._C._cuda_isCurrentStreamCapturing


def call_mode(captured: bool, default: Mode) -> Mode:
    """``graph`` while capturing, else ``default`` (the Communicator's ``mode``)."""
    return Mode.GRAPH if captured else default
