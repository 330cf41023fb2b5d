"""The Communicator: table selection, agreement across ranks, dispatch and fallback."""

from artune.communicator.communicator import Communicator

__all__ = ["Communicator"]
