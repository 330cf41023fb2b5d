"""nccl."""
