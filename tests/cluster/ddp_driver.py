"""Under mpirun: a small ResNet trained by gnnscale's DataParallel on each of gnnscale's
backends and by PyTorch's DDP from the same weights on the same batches; rank 0 saves every
model's parameters (``mpi/NAME``, ``torch/NAME``, ``ddp/NAME``).

Usage: mpirun ... -x MASTER_ADDR=HOST -x MASTER_PORT=PORT python ddp_driver.py OUT.npz

The torch backend's communicator comes first: it makes the default gloo group (rendezvous at
MASTER_ADDR), on which DDP runs too; the MPI backend's communicator is independent of it. Each
model starts from the same seed and is trained on its own communicator, so one cannot feed
another: a broken backend differs from DDP whichever runs first.
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
    out_path = sys.argv[1]
    comms = {"torch": init(backend="torch"), "mpi": init(backend="mpi")}
    rank = comms["mpi"].rank
    models = {}
    for backend, comm in comms.items():
        assert comm.rank == rank
        models[backend] = make_model()
        train(DataParallel(models[backend], comm), models[backend].parameters(), rank)
    models["ddp"] = make_model()
    train(DistributedDataParallel(models["ddp"]), models["ddp"].parameters(), rank)
    if rank == 0:
        np.savez(out_path, **{f"{kind}/{n}": p.detach().numpy() for kind, model in models.items()
                              for n, p in model.named_parameters()})
    dist.barrier()
    print(f"rank {rank} done", flush=True)

if __name__ == "__main__":
    main()
