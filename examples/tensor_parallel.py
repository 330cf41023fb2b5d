"""A tensor-parallel forward pass (torch's DTensor API) on the ``artune`` backend.

    python examples/tensor_parallel.py [--world-size 2] [--backend artune]

The MLP's first layer is split by columns and the second by rows
(``ColwiseParallel``/``RowwiseParallel``), so each forward pass ends in one
all-reduce of the activations. torch issues it as a functional collective on
the device mesh's process group; with ``init_process_group("artune")`` that
group is artune's, so the all-reduce goes through artune's table. Each rank
checks the output against the same MLP run whole in one process, and prints
how many all-reduces artune ran.
"""

from __future__ import annotations

import argparse
import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def build_model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 256))


def worker(rank: int, world_size: int, port: int, backend: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    import artune  # noqa: F401 - registers "artune"; not needed once installed (torch loads its entry point)

    dist.init_process_group(backend, rank=rank, world_size=world_size)
    mesh = init_device_mesh("cpu", (world_size,))
    model = parallelize_module(build_model(), mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
    x = torch.randn(8, 256, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        out = model(x)
        want = build_model()(x)
    out = out.full_tensor() if hasattr(out, "full_tensor") else out
    ok = torch.allclose(out, want, atol=1e-5)
    calls = dict(getattr(dist.group.WORLD, "allreduce_calls", {}))
    print(f"rank {rank}: output matches the whole model: {ok}; all-reduces by {backend}: {calls or 'n/a'}", flush=True)
    dist.destroy_process_group()
    if not ok:
        raise SystemExit(1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--backend", default="artune", help="artune (default) or gloo, to compare")
    parser.add_argument("--port", type=int, default=29517)
    args = parser.parse_args()
    mp.spawn(worker, args=(args.world_size, args.port, args.backend), nprocs=args.world_size)


if __name__ == "__main__":
    main()
