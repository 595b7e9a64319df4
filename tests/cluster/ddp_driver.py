"""Under mpirun: a small ResNet trained by gnnscale's DataParallel and by PyTorch's DDP from the same
weights on the same batches; rank 0 saves both models' parameters.

Usage: mpirun ... -x MASTER_ADDR=HOST -x MASTER_PORT=PORT python ddp_driver.py BACKEND OUT.npz

BACKEND is gnnscale's (``mpi`` or ``torch``). DDP runs on a gloo group: the default group
gnnscale's torch backend made, or (``mpi``) one joined through ``env://`` at MASTER_ADDR.
"""

import sys

import numpy as np
import torch
import torch.distributed as dist
from torch.nn import functional as F
from torch.nn.parallel import DistributedDataParallel

from gnnscale.comm import init
from gnnscale.cnn import ResNet
from gnnscale.parallel import DataParallel

STEPS, BATCH, LR = 4, 4, 0.05


def make_model() -> torch.nn.Module:
    torch.manual_seed(0)
    return ResNet(widths=(4, 8), blocks=(1, 1), num_classes=5, image_size=8, head="fc",
                  fc_hidden=(16,), fc_pool=1, norm="group")


def batch(step: int, rank: int):
    generator = torch.Generator().manual_seed(1000 * step + rank)
    images = torch.randn(BATCH, 3, 8, 8, generator=generator)
    labels = torch.randint(0, 5, (BATCH,), generator=generator)
    return images, labels


def train(wrapped, parameters, rank: int) -> None:
    optimizer = torch.optim.SGD(parameters, lr=LR, momentum=0.9)
    for step in range(STEPS):
        optimizer.zero_grad()
        images, labels = batch(step, rank)
        F.cross_entropy(wrapped(images), labels).backward()  # both average the gradients
        optimizer.step()


def main() -> None:
    backend, out_path = sys.argv[1], sys.argv[2]
    comm = init(backend=backend)
    if not dist.is_initialized():
        dist.init_process_group("gloo", init_method="env://", rank=comm.rank,
                                world_size=comm.size)
    ours = make_model()
    train(DataParallel(ours, comm), ours.parameters(), comm.rank)
    theirs = make_model()
    train(DistributedDataParallel(theirs), theirs.parameters(), comm.rank)
    if comm.rank == 0:
        np.savez(out_path, **{f"ours/{n}": p.detach().numpy() for n, p in ours.named_parameters()},
                 **{f"ddp/{n}": p.detach().numpy() for n, p in theirs.named_parameters()})
    dist.barrier()
    print(f"rank {comm.rank} done", flush=True)


if __name__ == "__main__":
    main()
