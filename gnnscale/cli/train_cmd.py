"""``gnnscale train``: full-batch training of a GNN, on one process or under ``mpirun``."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

from ..errors import UsageError
from .arguments import (DEFAULT_CHECKPOINT_EVERY, add_evaluation_arguments,
                        add_output_arguments, add_training_arguments)
from .build import build_trainer, check_build_arguments
from . import memory_check
from .common import agreed_failure, formatter, interrupted, mpirun_words, say
from .interrupts import remembering, signalled, stop_if_signalled
from .progress import print_line, progress_bar
from .report import format_profile_table, format_time_table, run_summary


def add_parser(subparsers) -> None:
    """Register ``train`` with every option and its default."""
    p = subparsers.add_parser(
        "train", help="train a GNN full-batch (run under mpirun for several ranks)",
        description="Full-batch GNN training. `gnnscale train` runs one process; "
                    "`mpirun -n K gnnscale train ...` splits the graph over K ranks.",
        formatter_class=formatter)
    add_training_arguments(p)
    memory_check.add_memory_plan_argument(p)
    add_evaluation_arguments(p)
    add_output_arguments(p)
    p.set_defaults(func=run, check=check_arguments, outputs=outputs,
                   compiled_modules=lambda _args: ("torch",))


def outputs(args) -> list[tuple]:
    """What ``train`` writes, as :func:`gnnscale.cli.outputs.check_outputs` takes it."""
    per_part = args.predictions_layout == "per-part"
    return [(args.metrics_out, "--metrics-out", "file"), (args.plot, "--plot", "file"),
            (args.predictions_out, "--predictions-out", "folder" if per_part else "file"),
            (args.checkpoint_dir, "--checkpoint-dir", "folder")]


MAX_EPOCHS_VARIABLE = "GNNSCALE_MAX_EPOCHS"


def check_arguments(args) -> None:
    """Option combinations that cannot work, refused before anything is loaded; applies
    ``$GNNSCALE_MAX_EPOCHS``."""
    check_build_arguments(args)
    cap = os.environ.get(MAX_EPOCHS_VARIABLE)
    if cap:  # a smoke test of a job script: every train command stops after `cap` epochs
        if not cap.isdigit() or int(cap) < 1:
            raise UsageError(f"{MAX_EPOCHS_VARIABLE}={cap!r} must be a positive integer")
        args.epochs_asked, args.epochs = args.epochs, min(args.epochs, int(cap))
    if args.checkpoint_every is not None and not args.checkpoint_dir:
        raise UsageError(f"--checkpoint-every {args.checkpoint_every} needs --checkpoint-dir "
                         f"(where to write the checkpoints)")
    if args.resume and not args.checkpoint_dir:
        raise UsageError("--resume needs --checkpoint-dir (where the checkpoints are)")


def run(args) -> int:
    # Ctrl-C is remembered (_stop): an interrupt whose KeyboardInterrupt is dropped in a
    # callback while the job is set up still stops it, at the first epoch's end at the latest
    with remembering(_stop, fresh=False):
        return _run(args)


def _run(args) -> int:
    import torch

    from .. import comm as comm_module
    from ..engine import MetricsWriter, write_predictions
    from ..threads import default_threads

    torch.set_num_threads(args.threads or default_threads())
    comm = comm_module.init(args.backend)
    trainer, header, metric = build_trainer(args, comm)
    resumed_from = _maybe_resume(trainer, args, comm)
    say(header)
    if getattr(args, "epochs_asked", args.epochs) != args.epochs:
        say(f"{MAX_EPOCHS_VARIABLE}={os.environ[MAX_EPOCHS_VARIABLE]}: training {args.epochs} "
            f"of the {args.epochs_asked} epochs asked for")
    if args.metric is None and metric == "auc":
        say("binary task: the best epoch is picked by validation ROC AUC (accuracy is "
            "reported too; --metric acc picks by accuracy)")
    if resumed_from is None:
        say(f"no checkpoint found in {args.checkpoint_dir}; starting at epoch 1")
    elif resumed_from:
        say(f"resumed from {args.checkpoint_dir} after epoch {resumed_from}")
    problem = trainer.problem
    writer = MetricsWriter(args.metrics_out, comm,
                           start=[r.to_json() for r in trainer.history])
    saved = [resumed_from] if resumed_from else []  # epochs of the checkpoints on disk
    # Open MPI's launcher passes Ctrl-C on to the ranks as SIGTERM: training stops as for Ctrl-C
    on_term = signal.signal(signal.SIGTERM, _stop) if comm.size > 1 else None
    try:
        stop_if_signalled()  # a Ctrl-C while the job was set up, its KeyboardInterrupt dropped
        records = _train_with_progress(trainer, args, comm, writer, metric, saved)
    except BaseException as exc:
        if not interrupted(exc):
            raise
        if comm.rank == 0:  # Ctrl-C: say where training stopped and how to go on
            tell_user(interrupted_line(args, trainer.epoch, saved[-1] if saved else None,
                                       comm.size), launched=comm.size > 1)
        writer.close()
        raise KeyboardInterrupt from None
    finally:
        if on_term is not None:
            signal.signal(signal.SIGTERM, on_term)
    if problem.graph.staleness is not None:
        problem.graph.staleness.close()  # complete exchanges still in flight (collective)
    if args.predictions_out:
        path = write_predictions(trainer, args.predictions_out, args.predictions_layout)
        say(f"predictions for every node written to {path if comm.rank == 0 else ''}"
            f"{args.predictions_out if args.predictions_layout == 'per-part' else ''}")
    if not records:
        say(f"nothing to do: the checkpoint is already at epoch {trainer.epoch} of {args.epochs}")
        writer.close()
        return 0
    final = run_summary(trainer, records, metric)
    writer.write(final)
    writer.close()
    say(format_time_table(final))
    if args.profile:
        say(format_profile_table(final["per_rank"]))
    if args.plot and comm.rank == 0:
        from .plot_cmd import plot_records

        plot_records([r.to_json() for r in trainer.history] + [final], args.plot)
        say(f"plot written to {args.plot}")
    return 0


_saving: list[bool] = []  # non-empty while a checkpoint is written


def _stop(signum, frame):
    """Ctrl-C (or mpirun's SIGTERM): stop training. While a checkpoint is being written the
    first signal waits for the write to end, so the line that names the last checkpoint is
    true; a second one stops at once."""
    signalled.append(signum)
    if not _saving or len(signalled) > 1:
        raise KeyboardInterrupt


def tell_user(line: str, launched: bool) -> None:
    """Print ``line`` on stderr; under a launcher (``launched``) on the terminal instead where
    there is one: Open MPI's launcher answers Ctrl-C by killing the ranks within a moment and
    no longer forwards what they print."""
    if launched:
        try:
            with open("/dev/tty", "w") as terminal:
                terminal.write(line + "\n")
            return
        except OSError:  # no terminal (a batch job, a test): stderr as usual
            pass
    print(line, file=sys.stderr, flush=True)


def interrupted_line(args, completed: int, checkpoint: int | None, ranks: int) -> str:
    """What ``train`` says when Ctrl-C stops it: the epoch it stopped in, the last checkpoint
    (or that there is none) and the command that continues from it."""
    line = f"interrupted in epoch {completed + 1} of {args.epochs}"
    if not args.checkpoint_dir:
        return (f"{line}; no checkpoint (--checkpoint-dir was not given): a rerun starts at "
                f"epoch 1")
    from ..engine.checkpoint import LATEST

    if checkpoint is None:
        saved = (f"no checkpoint written yet (the first comes after epoch "
                 f"{min(args.checkpoint_every or DEFAULT_CHECKPOINT_EVERY, args.epochs)})")
    else:
        saved = f"last checkpoint {Path(args.checkpoint_dir) / LATEST} after epoch {checkpoint}"
    command = resume_command(getattr(args, "command_line", None), ranks)
    return f"{line}; {saved}" + (f"; continue with: {command}" if command else "")


def resume_command(argv, ranks: int) -> str | None:
    """The command line ``argv`` (the words after ``gnnscale``) with ``--resume``, under
    ``mpirun -n ranks`` when there are several; None when the words are not known."""
    import shlex

    if argv is None:
        return None
    words = ["gnnscale", *argv, *(["--resume"] if "--resume" not in argv else [])]
    launcher = mpirun_words(ranks) if ranks > 1 else []
    return shlex.join([*launcher, *words])


#: the options a checkpoint must have been written with to be resumed: the data and the model
RESUME_SETTINGS = ("dataset", "num_nodes", "split", "dataset_option", "model", "layers",
                   "hidden", "heads", "out_heads", "residual", "norm", "activation",
                   "train_eps")


def run_settings(args) -> dict:
    """The settings a checkpoint records and a resumed run must share, keyed by option
    (``{"--model": "gcn", ...}``); the dataset only where it is read (not with
    --partitions, whose store is checked by its shapes)."""
    skip = {"dataset"} if getattr(args, "partitions", None) else set()
    settings = {}
    for name in RESUME_SETTINGS:
        if name in skip:
            continue
        value = getattr(args, name, None)
        if name == "dataset_option":  # KEY=VALUE pairs, as the command line gave them
            value = " ".join(f"{k}={v}" for k, v in value) if value else None
        settings[f"--{name.replace('_', '-')}"] = value
    return settings


def _maybe_resume(trainer, args, comm) -> int | None:
    """With --resume: load --checkpoint-dir's latest checkpoint and return its epoch, or None
    when there is none yet (a fresh run). Without --resume: 0. A --lr or --weight-decay other
    than the checkpoint's applies from the next epoch on, and the run says so."""
    from ..engine import load_checkpoint
    from ..engine.checkpoint import LATEST

    if not args.resume:
        return 0
    latest = Path(args.checkpoint_dir) / LATEST
    exists = comm.allgather_object(latest.is_file())
    if not any(exists):
        return None
    with agreed_failure(comm):
        epoch = load_checkpoint(trainer, latest, settings=run_settings(args))
    for option, key, value in (("--lr", "lr", args.lr),
                               ("--weight-decay", "weight_decay", args.weight_decay)):
        groups = trainer.optimizer.param_groups
        if groups[0][key] != value:
            say(f"{option} {value} applies from epoch {epoch + 1} on (the checkpoint was "
                f"trained with {groups[0][key]})")
            for group in groups:
                group[key] = value
    return epoch


def _epoch_line(record, metric: str) -> str:
    if not record.evaluated:
        return (f"epoch {record.epoch:4d}  loss {record.loss:.4f}  (not evaluated)  "
                f"time {record.epoch_time_s * 1e3:.1f} ms")
    line = (f"epoch {record.epoch:4d}  loss {record.loss:.4f}  "
            f"train {record.train_acc:.4f}  val {record.val_acc:.4f}  "
            f"test {record.test_acc:.4f}  time {record.epoch_time_s * 1e3:.1f} ms")
    if metric != "acc":
        line += (f"  val_{metric} {record.metrics[f'val_{metric}']:.4f}  "
                 f"test_{metric} {record.metrics[f'test_{metric}']:.4f}")
    return line


def _train_with_progress(trainer, args, comm, writer, metric: str, saved: list):
    """Train to --epochs: metrics lines, epoch lines, the bar (terminals only), checkpoints
    (their epochs appended to ``saved``), --profile probes. Returns the records of the epochs
    run."""
    from ..engine import save_checkpoint

    log_every = args.log_every or max(1, args.epochs // 10)
    checkpoint_every = args.checkpoint_every or DEFAULT_CHECKPOINT_EVERY
    probe_every = max(1, args.epochs // 5)
    bar = progress_bar(args.epochs, "training", "epoch", args.no_progress, initial=trainer.epoch)

    def on_epoch(record):
        if args.profile and (record.epoch == 1 or record.epoch % probe_every == 0):
            record.profile = trainer.probe_overlap()
        writer.write(record.to_json())
        bar.update(1)
        if record.evaluated:
            bar.set_postfix(loss=f"{record.loss:.4f}", val=f"{record.val_acc:.3f}",
                            test=f"{record.test_acc:.3f}")
        else:
            bar.set_postfix(loss=f"{record.loss:.4f}")
        if comm.rank == 0 and (record.epoch % log_every == 0 or record.epoch == 1):
            print_line(bar, _epoch_line(record, metric))
        if args.checkpoint_dir and (record.epoch % checkpoint_every == 0
                                    or record.epoch == args.epochs):
            _saving.append(True)
            try:
                save_checkpoint(trainer, args.checkpoint_dir, settings=run_settings(args))
                saved.append(record.epoch)
            finally:
                _saving.clear()
        stop_if_signalled()  # its KeyboardInterrupt dropped in a callback: stop here instead

    try:
        return trainer.fit(args.epochs, on_epoch, patience=args.early_stop,
                           monitor=f"val_{metric}", eval_every=args.eval_every)
    finally:
        bar.close()
