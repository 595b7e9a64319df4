"""Run ``gnnscale train`` through its public entry point, with an optional injected fault.

Used by test_rel_faults.py under ``mpirun``; nothing here is part of gnnscale itself.

    python rel_fault_driver.py --pid-dir DIR [--raise-at RANK:EPOCH] [--step-delay S] \
        -- <gnnscale train args>

Every rank writes its pid to ``DIR/rank-<r>.pid`` (so a test can SIGKILL one rank of a running
job). ``--raise-at`` makes that rank raise ``RuntimeError`` in the middle of that epoch: after the
forward pass (whose halo exchanges the other ranks take part in), before backward, so the other
ranks are left waiting in a collective; the time of the fault goes to ``DIR/fault-time``.
``--step-delay`` sleeps that many seconds after each training step (same numbers, a slower
job), so a test watching the metrics file can act between two given epochs of a job whose
epochs take milliseconds.
"""

import argparse
import os
import sys
import time
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pid-dir", required=True)
    parser.add_argument("--raise-at", default=None)
    parser.add_argument("--step-delay", type=float, default=0.0)
    parser.add_argument("train_args", nargs=argparse.REMAINDER)
    opts = parser.parse_args()
    train_args = [a for a in opts.train_args if a != "--"]

    from gnnscale.comm import env_rank
    from gnnscale.engine import trainer as trainer_module

    rank = env_rank()
    pid_dir = Path(opts.pid_dir)
    pid_dir.mkdir(parents=True, exist_ok=True)
    tmp = pid_dir / f".rank-{rank}.pid.tmp"
    tmp.write_text(str(os.getpid()))
    tmp.replace(pid_dir / f"rank-{rank}.pid")

    if opts.raise_at:
        fault_rank, fault_epoch = (int(v) for v in opts.raise_at.split(":"))
        original = trainer_module.Trainer.train_step

        def train_step(self):
            if self.comm.rank == fault_rank and self.epoch + 1 == fault_epoch:
                self.model.train()
                self.model(self.problem.x, self.problem.graph)  # peers exchange halos with us
                (pid_dir / "fault-time").write_text(repr(time.time()))
                raise RuntimeError(f"injected fault in epoch {fault_epoch}")
            return original(self)

        trainer_module.Trainer.train_step = train_step

    if opts.step_delay > 0:
        stepped = trainer_module.Trainer.train_step

        def delayed_step(self):
            result = stepped(self)
            time.sleep(opts.step_delay)
            return result

        trainer_module.Trainer.train_step = delayed_step

    from gnnscale.cli.main import main as gnnscale_main

    return gnnscale_main(["train", *train_args])


if __name__ == "__main__":
    sys.exit(main())
