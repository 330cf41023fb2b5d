"""The package's version, in a leaf: a module names it from here, never from the package root, whose
``__init__`` (its re-exports, the torch backend's registration) may be what is importing that module."""

__version__ = "0.1.0"
