"""TensorRT-LLM's all-reduce lookup tables in and out.

``read`` turns a checkout's ``customAllReduceUtils.h`` (with its enums) into
shape tables that decide as the header does (``header``, ``enums``, ``cxx``
read the C++ text; nothing is compiled); ``checks`` holds the reviewer's
findings (codes ``R1xx``); ``write`` prints a table as the header's block;
``generator`` writes and reads the CSV of TensorRT-LLM's heuristic code
generator.
"""
