"""DDP training of a small model: the same program on the ``artune`` backend or on gloo.

    torchrun --nproc-per-node 2 examples/ddp_train.py [--backend artune|gloo] [--steps 20]
    python examples/ddp_train.py --spawn 2 [--backend artune|gloo]

The only artune-specific line is the backend name in ``init_process_group``
(with artune installed, torch registers the backend at ``import torch``; the
``import artune`` below only matters when running from a source checkout).
DDP's gradient buckets are then all-reduced through artune's table. Rank 0
prints the loss of every step; with 2 ranks the losses are bit-identical to
gloo's (both sum a + b), so the two backends' outputs can be diffed.
"""

from __future__ import annotations

import argparse
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import artune  # noqa: F401 - registers "artune" when run from a source checkout


def train(backend: str, steps: int) -> None:
    dist.init_process_group(backend)
    rank = dist.get_rank()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = DDP(torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    gen = torch.Generator().manual_seed(rank)
    for step in range(steps):
        x = torch.randn(32, 64, generator=gen)
        y = torch.randint(0, 10, (32,), generator=gen)
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        if rank == 0:
            print(f"step {step:3d} loss {loss.item():.8f}", flush=True)
    if rank == 0 and backend == "artune":
        print(f"all-reduces run by: {dict(dist.group.WORLD.allreduce_calls)}")
    del model
    dist.destroy_process_group()


def _spawned(rank: int, world_size: int, port: int, backend: str, steps: int) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world_size))
    train(backend, steps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", default="artune")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--spawn", type=int, metavar="N", help="start N ranks here instead of under torchrun")
    parser.add_argument("--port", type=int, default=29519)
    args = parser.parse_args()
    if args.spawn:
        import torch.multiprocessing as mp

        mp.spawn(_spawned, args=(args.spawn, args.port, args.backend, args.steps), nprocs=args.spawn)
    else:
        train(args.backend, args.steps)


if __name__ == "__main__":
    main()
