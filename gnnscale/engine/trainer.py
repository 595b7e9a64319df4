"""Full-batch training of a distributed GNN: one optimiser step per epoch over the whole graph.

The loss is the mean over *all* training nodes of *all* ranks (each rank sums its own and
divides by the global count), and weight gradients are summed across ranks, so every rank takes
the same step as one process on the whole graph would.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import math
import resource
import time
from typing import Callable, Iterable

import numpy as np
import torch
from torch.nn import functional as F

from ..comm import Communicator
from ..nn import dropout as dropout_rng
from ..nn.gemm import uses_onednn
from ..parallel import DataParallel
from ..parallel.bucket_size import overlap_bucket_bytes
from .adam import Adam
from .evaluation import evaluate_global
from .local_problem import LocalProblem
from .memory import retain_freed_memory
from .metrics import EpochRecord


def peak_rss_mb() -> float:
    """This process's peak resident memory so far, in MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _bucket_mb(model: torch.nn.Module) -> float:
    """Gradient bucket size: a quarter of the gradients, between 64 KiB and 4 MiB (GNN weights
    are small; a fixed range spares the collective latency probe at start-up)."""
    total = sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)
    return overlap_bucket_bytes(total, cap=4 * 2**20, floor=64 * 2**10) / 2**20


def rank_seed(seed: int, rank: int) -> int:
    """A per-rank seed derived from (seed, rank), for dropout and other rank-local randomness."""
    return int(np.random.SeedSequence([int(seed), int(rank)]).generate_state(1)[0])


class Trainer:
    """Trains ``model`` on this rank's :class:`LocalProblem`.

    Args:
        model: a module called as ``model(x, graph)`` returning logits for owned rows; where
            its ``forward`` also takes ``rows`` (as :class:`gnnscale.nn.GNN`'s does) training
            asks it for the training rows' logits only.
        problem: this rank's graph, features, labels and masks.
        comm: the communicator of the job.
        lr: Adam learning rate (default 0.01).
        weight_decay: Adam weight decay (default 5e-4).
        seed: seeds rank-local randomness (dropout) as ``rank_seed(seed, rank)``.
        metrics: metrics to compute per split, from ``("acc", "f1", "auc")`` (default acc).
        compute_dtype: ``torch.bfloat16`` runs the forward pass under autocast (GEMMs in
            bf16, accumulation and the loss in float32; parameters, optimiser state and
            sparse aggregation stay float32); None (default) or ``torch.float32``: float32.
    """

    def __init__(self, model: torch.nn.Module, problem: LocalProblem, comm: Communicator,
                 lr: float = 0.01, weight_decay: float = 5e-4, seed: int = 0,
                 metrics=("acc",), compute_dtype: torch.dtype | None = None):
        if compute_dtype not in (None, torch.float32, torch.bfloat16):
            raise ValueError(f"compute_dtype must be torch.float32 or torch.bfloat16, got "
                             f"{compute_dtype}")
        self.compute_dtype = compute_dtype if compute_dtype != torch.float32 else None
        uses_onednn()  # GNNSCALE_GEMM read (and a bad value refused) before anything runs
        self.model = model
        self.problem = problem
        self.comm = comm
        self.metrics = tuple(dict.fromkeys(("acc", *metrics)))
        self.optimizer = Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
        # Weight gradients are summed across ranks by the collective layer's bucketed async
        # allreduce, each bucket posted as backward produces it (overlapping the remaining
        # layers' backward). Summed, not averaged: the loss is already the global mean.
        self.data_parallel = None
        if comm.size > 1:
            self.data_parallel = DataParallel(
                model, comm, bucket_mb=_bucket_mb(model), average=False,
                broadcast_buffers=False, sync_parameters=False)
        self.epoch = 0
        # this rank's training rows and their labels, found once: selecting rows by index
        # (its gradient an index_add) costs half of selecting by the boolean mask each step
        rows = problem.masks["train"].nonzero().squeeze(1)
        self._train_rows = (rows, problem.y.index_select(0, rows))
        # a model whose forward takes ``rows`` (gnnscale.nn.GNN) returns those logits only
        self._model_selects_rows = "rows" in inspect.signature(model.forward).parameters
        self.history: list[EpochRecord] = []  # every epoch's record, kept across resumes
        retain_freed_memory()  # reuse each epoch's activation pages (see memory.py)
        torch.manual_seed(rank_seed(seed, comm.rank))
        dropout_rng.manual_seed(rank_seed(seed, comm.rank))

    def train_step(self) -> tuple[float, dict]:
        """One forward/backward/allreduce/step. Returns (this rank's loss share, timings)."""
        problem = self.problem
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        policy = problem.graph.staleness  # stale halos in training only
        if policy is not None:
            policy.begin_step()
        try:
            t0 = time.perf_counter()
            loss = self._summed_train_loss(self.data_parallel or self.model)
            loss = loss / max(problem.global_counts["train"], 1)
            t1 = time.perf_counter()
            loss.backward()
            t2 = time.perf_counter()
        finally:
            if policy is not None:
                policy.end_step()
        grad_sync = self.data_parallel.stats if self.data_parallel is not None else {}
        t3 = time.perf_counter()
        self.optimizer.step()
        t4 = time.perf_counter()
        # backward_s includes the wait for the last gradient buckets (grad_allreduce_s of it)
        timings = {"forward_s": t1 - t0, "backward_s": t2 - t1,
                   "grad_allreduce_s": grad_sync.get("exposed_comm_s", 0.0),
                   "grad_comm_s": grad_sync.get("comm_s", 0.0), "optimizer_s": t4 - t3}
        return float(loss.detach()), timings

    @torch.no_grad()
    def predict(self) -> torch.Tensor:
        """Logits of this rank's owned nodes with the model in eval mode (no dropout)."""
        self.model.eval()
        with self._autocast():
            return self.model(self.problem.x, self.problem.graph).float()

    def _summed_train_loss(self, module: torch.nn.Module) -> torch.Tensor:
        """Forward through ``module`` (the model, or its DataParallel wrapper) and the summed
        float32 cross-entropy over this rank's training nodes."""
        problem = self.problem
        rows, labels = self._train_rows
        with self._autocast():
            if self._model_selects_rows:  # the last layer computes the loss's rows only
                logits = module(problem.x, problem.graph, rows=rows)
            else:
                logits = module(problem.x, problem.graph).index_select(0, rows)
        return F.cross_entropy(logits.float(), labels, reduction="sum")

    def _autocast(self):
        """bf16 autocast when ``compute_dtype`` asks for it, else a no-op context."""
        if self.compute_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.problem.x.device.type, dtype=self.compute_dtype)

    def evaluate(self, local_loss: float = 0.0) -> tuple[float, dict]:
        """Global (loss, ``{split}_{metric}`` dict) of the current model."""
        p = self.problem
        return evaluate_global(local_loss, self.predict(), p.y, p.masks, p.num_classes,
                               self.comm, self.metrics)

    def probe_overlap(self) -> dict:
        """Measure what overlapping hides: one forward/backward with every halo exchange
        waited for at once (its wait is the whole exchange) and one overlapped (its wait is
        the exposed part). In both, the ranks meet at a barrier before each exchange is
        posted, so the waits measure the exchange and not load imbalance (a peer reaching the
        layer late, which no overlap can hide; training itself has no barriers). No optimiser
        step; gradients and random state are restored, so training continues exactly as
        without the probe. Collective.
        """
        plan = self.problem.graph.halo_plan
        saved = (torch.get_rng_state(), dropout_rng.get_state(), plan.overlap,
                 plan.quantized_exchanges)
        waits = {}
        with contextlib.ExitStack() as stack:
            if self.data_parallel is not None:  # no gradient allreduce in the probe
                stack.enter_context(self.data_parallel.no_sync())
            plan.configure(align_posts=True)
            stack.callback(plan.configure, align_posts=False)
            for overlap in (False, True):
                waits[overlap] = self._probe_once(plan, saved, overlap)
        self.optimizer.zero_grad(set_to_none=True)
        torch.set_rng_state(saved[0])
        dropout_rng.set_state(saved[1])
        plan.configure(overlap=saved[2])
        plan.quantized_exchanges = saved[3]  # the probe's exchanges round nothing later
        comm_s, exposed_s = waits[False], waits[True]
        return {"halo_comm_s": comm_s, "halo_exposed_s": exposed_s,
                "overlap_fraction": max(0.0, 1.0 - exposed_s / comm_s) if comm_s > 0 else 1.0}

    def _probe_once(self, plan, saved, overlap: bool) -> float:
        """One forward/backward with the plan's ``overlap`` set so; the halo wait it saw."""
        torch.set_rng_state(saved[0])
        dropout_rng.set_state(saved[1])
        plan.configure(overlap=overlap)
        plan.stats.reset()
        self.model.train()
        self._summed_train_loss(self.model).backward()
        return plan.stats.reset().halo_wait_s

    def run_epoch(self, evaluate: bool = True) -> EpochRecord:
        """Train one epoch, evaluate (unless ``evaluate`` is False: then the record holds the
        training loss and no metrics), and return its record (identical numbers on every
        rank)."""
        stats = self.problem.graph.halo_plan.stats
        stats.reset()
        start = time.perf_counter()
        local_loss, timings = self.train_step()
        comm_stats = stats.reset()  # the training step's exchanges only; eval's go to eval_s
        timings["halo_wait_s"] = comm_stats.halo_wait_s
        t_eval = time.perf_counter()
        if evaluate:
            loss, values = self.evaluate(local_loss)
        else:  # the global training loss only
            loss = float(self.comm.allreduce(torch.tensor([local_loss], dtype=torch.float64)))
            values = {}
        timings["eval_s"] = time.perf_counter() - t_eval
        stats.reset()
        self.epoch += 1
        timings["compute_s"] = max(0.0, timings["forward_s"] + timings["backward_s"]
                                   - timings["halo_wait_s"] - timings["grad_allreduce_s"])
        record = EpochRecord(epoch=self.epoch, loss=loss, train_acc=values.get("train_acc"),
                             val_acc=values.get("val_acc"), test_acc=values.get("test_acc"),
                             epoch_time_s=time.perf_counter() - start, time=timings,
                             halo_bytes_sent=comm_stats.halo_bytes_sent, metrics=values,
                             peak_rss_mb=peak_rss_mb(), staleness=self._staleness_report())
        self.history.append(record)
        return record

    def _staleness_report(self) -> dict:
        """Policy and age (epochs) of the halo values the last training step used."""
        policy = self.problem.graph.staleness
        if policy is None:
            return {"policy": "exact", "max_age": 0, "mean_age": 0.0}
        return policy.report()

    def fit(self, epochs: int, on_epoch: Callable[[EpochRecord], None] | None = None,
            patience: int | None = None, monitor: str = "val_acc",
            eval_every: int = 1) -> list[EpochRecord]:
        """Train until ``self.epoch == epochs``, calling ``on_epoch(record)`` after each epoch.

        patience: stop early once ``monitor`` (higher is better; ``loss``: lower) has not
        improved for this many epochs, counting the epochs of :attr:`history` (so a resumed
        run stops where the uninterrupted one would). Every rank sees the same numbers, so all
        stop together. eval_every: evaluate after every ``eval_every``-th epoch and after the
        last (default 1: every epoch); the others' records hold the training loss only, and
        the patience is checked at evaluations. Training itself is the same either way.
        Returns the records of the epochs this call ran.
        """
        if eval_every < 1:
            raise ValueError(f"eval_every must be at least 1, got {eval_every}")
        records, best, best_epoch = [], -math.inf, 0
        sign = -1.0 if monitor == "loss" else 1.0

        def stop_after(record) -> bool:
            nonlocal best, best_epoch
            if not record.has(monitor):
                return False  # not evaluated
            value = sign * record.value(monitor)
            if value > best:
                best, best_epoch = value, record.epoch
            return patience is not None and record.epoch - best_epoch >= patience

        stopped = [stop_after(record) for record in self.history]
        if stopped and stopped[-1]:
            return records  # a resumed run that had already stopped early
        while self.epoch < epochs:
            epoch = self.epoch + 1
            record = self.run_epoch(evaluate=epoch % eval_every == 0 or epoch == epochs)
            records.append(record)
            if on_epoch is not None:
                on_epoch(record)
            if stop_after(record):
                break
        return records

    # -- checkpoint state -----------------------------------------------------------------
    def state_dict(self) -> dict:
        """Everything a resumed run needs, identical on every rank except the RNG states,
        which are gathered from every rank (collective), and the epoch records (this rank's,
        whose losses and metrics every rank shares) as plain JSON values, so a resumed run's
        summary and metrics file cover every epoch. The halo plan's count of quantized
        exchanges travels with the random states: it keys the stochastic rounding of
        ``--halo-dtype int8|int4|int2``, so a resumed quantized run rounds as one that never
        stopped."""
        rng = {"torch": torch.get_rng_state(), "dropout": dropout_rng.get_state(),
               "quantized_exchanges": self.problem.graph.halo_plan.quantized_exchanges}
        return {"epoch": self.epoch, "model": self.model.state_dict(),
                "optimizer": self.optimizer.state_dict(),
                "rng_per_rank": self.comm.allgather_object(rng), "num_ranks": self.comm.size,
                "history": json.loads(json.dumps([r.to_json() for r in self.history]))}

    def load_state_dict(self, state: dict) -> None:
        """Restore a :meth:`state_dict` saved by a job with the same number of ranks."""
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.epoch = int(state["epoch"])
        self.history = [EpochRecord(**record) for record in state["history"]]
        rng = state["rng_per_rank"][self.comm.rank]
        torch.set_rng_state(rng["torch"])
        dropout_rng.set_state(rng["dropout"])
        if "quantized_exchanges" in rng:  # without it the count stays as configured
            self.problem.graph.halo_plan.quantized_exchanges = rng["quantized_exchanges"]


def summarise(records: Iterable[EpochRecord], monitor: str = "val_acc") -> dict:
    """Final summary: best epoch by ``monitor``, its test metrics, mean epoch time, time split."""
    records = list(records)
    if not records:
        return {}
    sign = -1.0 if monitor == "loss" else 1.0
    evaluated = [r for r in records if r.has(monitor)]  # fit always evaluates the last epoch
    best = max(evaluated, key=lambda r: (sign * r.value(monitor), -r.epoch))
    steady = records[1:] or records  # the first epoch pays one-off set-up costs
    times = {k: float(np.mean([r.time.get(k, 0.0) for r in steady])) for k in steady[0].time}
    last = records[-1]
    return {"summary": True, "epochs": last.epoch, "final_loss": last.loss,
            "final_train_acc": last.train_acc, "final_val_acc": last.val_acc,
            "final_test_acc": last.test_acc,
            "final_metrics": last.metrics, "monitor": monitor, "best_epoch": best.epoch,
            "best_val_acc": best.val_acc, "test_acc_at_best_val": best.test_acc,
            "best_metrics": best.metrics,
            "mean_epoch_time_s": float(np.mean([r.epoch_time_s for r in steady])),
            "mean_time_breakdown_s": times,
            "total_time_s": float(sum(r.epoch_time_s for r in records))}
