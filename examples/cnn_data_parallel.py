"""Data-parallel CNN training with gnnscale's collective layer, on synthetic images.

Each rank trains a replica of a ResNet on its own slice of every global batch; gradients are
averaged by :class:`gnnscale.parallel.DataParallel` while backward runs. The data are synthetic
but learnable (each class adds its own fixed pattern to Gaussian noise), CIFAR-shaped
(3x32x32, 10 classes) or ImageNet-shaped (3x224x224, 1000 classes).

Examples::

    mpirun -n 2 -x OMP_NUM_THREADS=1 python examples/cnn_data_parallel.py --steps 50
    mpirun -n 4 python examples/cnn_data_parallel.py --optimizer lars --warmup-steps 20 \\
        --lr 0.1 --batch-size 64 --label-smoothing 0.1 --precision bf16
    mpirun -n 2 python examples/cnn_data_parallel.py --model resnet_small_fc --backend torch
    python examples/cnn_data_parallel.py --dataset imagenet --batch-size 8 --steps 5

The learning rate follows the linear scaling rule (``--lr`` is per 256 images, multiplied by
global batch / 256) with a linear warmup from the unscaled rate (Goyal et al., 2017; from a
tenth of it when the global batch is under 256). Every
``--log-every`` steps rank 0 prints the loss, images/s, and the split of a step into compute
(forward + backward + optimizer) and communication: the allreduce time, how much of it was
exposed after backward, and the fraction hidden behind backward.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gnnscale.comm import BACKENDS, init  # noqa: E402
from gnnscale.cnn import ResNet, count_parameters  # noqa: E402
from gnnscale.parallel import (LARS, DataParallel, autocast,  # noqa: E402
                               label_smoothing_cross_entropy, scaled_lr, warmup_schedule)

DATASETS = {"cifar": (32, 10), "imagenet": (224, 1000)}
MODELS = {
    "resnet_small": dict(widths=(32, 64, 128, 256), blocks=(1, 1, 1, 1), head="linear"),
    "resnet_small_fc": dict(widths=(32, 64, 128, 256), blocks=(1, 1, 1, 1), head="fc"),
    "resnet18": dict(widths=(64, 128, 256, 512), blocks=(2, 2, 2, 2), head="linear"),
}


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--dataset", choices=sorted(DATASETS), default="cifar")
    parser.add_argument("--model", choices=sorted(MODELS), default="resnet_small")
    parser.add_argument("--batch-size", type=int, default=32, help="images per rank per step")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--backend", choices=BACKENDS, default="auto")
    parser.add_argument("--bucket-mb", type=float, default=None,
                        help="gradient bucket size (default: from the communicator's fit)")
    parser.add_argument("--compression", choices=("none", "fp16", "bf16"), default="none")
    parser.add_argument("--optimizer", choices=("sgd", "lars"), default="sgd")
    parser.add_argument("--lr", type=float, default=0.1, help="learning rate per 256 images")
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--weight-decay", type=float, default=5e-4)
    parser.add_argument("--warmup-steps", type=int, default=5)
    parser.add_argument("--label-smoothing", type=float, default=0.0)
    parser.add_argument("--precision", choices=("fp32", "bf16"), default="fp32",
                        help="autocast precision of the forward pass (bf16 works on CPU)")
    parser.add_argument("--accumulate", type=int, default=1,
                        help="micro-batches per step (all but the last under no_sync)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per rank")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--log-every", type=int, default=5)
    parser.add_argument("--json", default=None, help="write the per-step records here (rank 0)")
    return parser.parse_args(argv)


class SyntheticImages:
    """Learnable random images: ``noise + pattern[label]``, a fixed pool per rank."""

    def __init__(self, image_size: int, classes: int, batch: int, seed: int, rank: int,
                 pool: int = 8):
        gen = torch.Generator().manual_seed(seed)  # patterns are shared by all ranks
        self.patterns = 0.5 * torch.randn(classes, 3, image_size, image_size, generator=gen)
        gen = torch.Generator().manual_seed(int(np.random.SeedSequence([seed, rank])
                                                .generate_state(1)[0]))
        self.batches = []
        for _ in range(pool):
            labels = torch.randint(0, classes, (batch,), generator=gen)
            images = torch.randn(batch, 3, image_size, image_size, generator=gen)
            self.batches.append((images + self.patterns[labels], labels))

    def __getitem__(self, step: int):
        return self.batches[step % len(self.batches)]


def main(argv=None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    comm = init(args.backend)
    rank, size = comm.rank, comm.size
    image_size, classes = DATASETS[args.dataset]
    torch.manual_seed(args.seed)
    model = ResNet(num_classes=classes, image_size=image_size, **MODELS[args.model])
    dp = DataParallel(model, comm, bucket_mb=args.bucket_mb,
                      compression=None if args.compression == "none" else args.compression)
    global_batch = args.batch_size * args.accumulate * size
    lr = scaled_lr(args.lr, global_batch)
    if args.optimizer == "lars":
        optimizer = LARS(dp.parameters(), lr=lr, momentum=args.momentum,
                         weight_decay=args.weight_decay)
    else:
        optimizer = torch.optim.SGD(dp.parameters(), lr=lr, momentum=args.momentum,
                                    weight_decay=args.weight_decay)
    # Goyal et al. warm up from the unscaled rate; below 256 images from a tenth of it
    start_factor = 256 / global_batch if global_batch > 256 else 0.1
    schedule = warmup_schedule(optimizer, args.warmup_steps, start_factor=start_factor)
    data = SyntheticImages(image_size, classes, args.batch_size, args.seed, rank)
    if rank == 0:
        print(f"{args.model} ({count_parameters(model) / 1e6:.2f}M parameters) on {size} "
              f"rank(s), backend {comm.backend}, {args.dataset}-shaped synthetic data, "
              f"global batch {global_batch}, lr {lr:.4g} ({args.optimizer}, warmup "
              f"{args.warmup_steps}), buckets {dp.bucket_bytes / 2**20:.2f} MiB, "
              f"compression {args.compression}, precision {args.precision}", flush=True)
    records = []
    for step in range(args.steps):
        comm.barrier()  # steps start together: times are not skewed by the previous one
        start = time.perf_counter()
        optimizer.zero_grad()
        loss_sum, correct = 0.0, 0
        for micro in range(args.accumulate):
            images, labels = data[step * args.accumulate + micro]
            last = micro == args.accumulate - 1
            with (dp.no_sync() if not last else _nothing()):
                with autocast(args.precision):
                    logits = dp(images)
                loss = label_smoothing_cross_entropy(logits.float(), labels,
                                                     args.label_smoothing) / args.accumulate
                loss.backward()
            loss_sum += float(loss.detach())
            correct += int((logits.argmax(1) == labels).sum())
        lr_used = optimizer.param_groups[0]["lr"]
        optimizer.step()
        schedule.step()
        step_s = time.perf_counter() - start
        stats = dp.stats if size > 1 else {}
        totals = comm.allreduce(torch.tensor([loss_sum, correct, step_s], dtype=torch.float64))
        record = {"step": step + 1, "loss": totals[0].item() / size,
                  "accuracy": totals[1].item() / (args.batch_size * args.accumulate * size),
                  "step_s": step_s, "images_per_s": global_batch / step_s,
                  "comm_s": stats.get("comm_s", 0.0),
                  "exposed_comm_s": stats.get("exposed_comm_s", 0.0),
                  "hidden_fraction": stats.get("hidden_fraction", 1.0),
                  "lr": lr_used}
        record["compute_s"] = step_s - record["exposed_comm_s"]
        records.append(record)
        if rank == 0 and ((step + 1) % args.log_every == 0 or step == 0):
            print(f"step {step + 1:4d}  loss {record['loss']:.4f}  acc {record['accuracy']:.3f}  "
                  f"{record['images_per_s']:8.1f} img/s  "
                  f"compute {1e3 * record['compute_s']:7.1f} ms  "
                  f"comm {1e3 * record['comm_s']:6.1f} ms "
                  f"(exposed {1e3 * record['exposed_comm_s']:5.1f} ms, "
                  f"hidden {100 * record['hidden_fraction']:3.0f}%)", flush=True)
    if rank == 0:
        steady = records[1:] or records
        summary = {key: float(np.median([r[key] for r in steady]))
                   for key in ("images_per_s", "step_s", "compute_s", "comm_s",
                               "exposed_comm_s", "hidden_fraction")}
        print("median over steps 2..: " + ", ".join(f"{k} {v:.4g}" for k, v in summary.items()),
              flush=True)
        if args.json:
            Path(args.json).write_text(json.dumps({"args": vars(args), "records": records,
                                                   "summary": summary}, indent=1))
    return 0


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


if __name__ == "__main__":
    sys.exit(main())
