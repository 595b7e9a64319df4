"""The README's batch script (README: On a cluster), run for real by Slurm: a one-machine
cluster (this machine's ``slurmctld`` and ``slurmd``, started here with their configuration,
state and logs in a temporary folder, and stopped at the end with everything they started)
runs it with ``sbatch``. The job trains on 2 ranks under ``srun``; then a second job is
requeued with ``scontrol requeue`` after its first checkpoint, and its restart resumes from that
checkpoint and finishes.

What is substituted in the script, and only this: the cluster's size (1 node, 2 tasks of 1 CPU),
the paths (this environment's ``gnnscale``, a 2-part store of the shipped Cora, a temporary run
folder), and ``module load openmpi`` (no environment modules here: the environment's own Open
MPI goes on PATH instead). ``GNNSCALE_MAX_EPOCHS`` caps the epochs (README: smoke tests).

Skips, saying why, where Slurm is not installed: ``make slurm`` (``tools/slurm.sh``, which
``make test`` runs first) installs Debian's ``slurm-wlm`` as root where apt-get exists.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mpi_launch import DATASETS_ROOT, mpi_env
from doc_blocks import readme_blocks
from gnnscale.testing.cluster import kill_until_gone

pytestmark = pytest.mark.timeout(400)

SLURM_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
PROGRAMS = ("slurmctld", "slurmd", "sbatch", "sinfo", "scontrol", "squeue", "scancel")
CHECKPOINT_EVERY = 10  # the script's --checkpoint-every: the requeue comes after the first one
FINAL_STATES = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
                "BOOT_FAIL", "DEADLINE", "PREEMPTED")


def batch_script(store: Path, run: Path) -> str:
    """The README's ``#SBATCH`` script with this machine's substitutions (module doc)."""
    scripts = [block for block in readme_blocks("bash") if "#SBATCH" in block]
    assert len(scripts) == 1, f"README.md has {len(scripts)} ```bash blocks with #SBATCH, not 1"
    script = scripts[0]
    venv_bin = Path(sys.prefix) / "bin"
    substitutions = [("#SBATCH --nodes=8", "#SBATCH --nodes=1"),
                     ("#SBATCH --ntasks-per-node=8", "#SBATCH --ntasks-per-node=2"),
                     ("#SBATCH --cpus-per-task=4", "#SBATCH --cpus-per-task=1"),
                     ("module load openmpi", f"export PATH={venv_bin}:$PATH"),
                     ("$HOME/venvs/gnnscale/bin/gnnscale", str(venv_bin / "gnnscale")),
                     ("/shared/parts/products-64", str(store)),
                     ("/shared/runs/products-sage", str(run))]
    for old, new in substitutions:
        assert old in script, f"the README's batch script no longer has {old!r}:\n{script}"
        script = script.replace(old, new)
    assert f"--checkpoint-every {CHECKPOINT_EVERY} --resume" in script, script
    return script


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _port_is_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _first_job_id() -> int:
    """A first job id whose ranks' meeting ports (20000 + job id, gnnscale.comm.launch) are
    free for this module's jobs."""
    for first in range(1000 + os.getpid() % 15000, 19990, 7):
        if all(_port_is_free(20000 + first + k) for k in range(4)):
            return first
    raise AssertionError("no free ports from 21000 on for the ranks to meet at")


def _plugin_dir(slurmctld: str) -> Path | None:
    """Where this Slurm's plugins are: beside the libslurmfull its daemons link."""
    try:
        linked = subprocess.run(["ldd", slurmctld], capture_output=True, text=True,
                                timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = re.search(r"=> (\S+)/libslurmfull[^/\s]*\.so", linked)
    return Path(found.group(1)) if found else None


class Cluster:
    """A one-node Slurm cluster of this machine, its files under ``folder``."""

    def __init__(self, folder: Path, programs: dict[str, str]):
        self.folder = folder
        self.programs = programs
        self.host = socket.gethostname()
        self.conf = folder / "slurm.conf"
        self.env = mpi_env({"SLURM_CONF": str(self.conf), "PATH": SLURM_PATH})
        self.env.pop("GNNSCALE_MAX_EPOCHS", None)
        self.daemons: list[tuple[str, subprocess.Popen]] = []

    # -- set-up and tear-down -------------------------------------------------------------
    def start(self) -> None:
        auth = self._auth()
        for name in ("state", "spool"):
            (self.folder / name).mkdir()
        f = self.folder
        self.conf.write_text(f"""\
ClusterName=gnnscaletest
SlurmctldHost={self.host}(127.0.0.1)
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
SlurmUser=root
SlurmdUser=root
{auth}
StateSaveLocation={f}/state
SlurmdSpoolDir={f}/spool
SlurmctldPidFile={f}/slurmctld.pid
SlurmdPidFile={f}/slurmd.pid
SlurmctldLogFile={f}/slurmctld.log
SlurmdLogFile={f}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/builtin
SchedulerParameters=sched_interval=1
KillWait=2
ReturnToService=2
JobRequeue=1
FirstJobId={_first_job_id()}
NodeName={self.host} NodeAddr=127.0.0.1 CPUs=2 State=UNKNOWN
PartitionName=test Nodes={self.host} Default=YES MaxTime=INFINITE State=UP
""")
        self._daemon("slurmctld", [self.programs["slurmctld"], "-D", "-c", "-f", str(self.conf)])
        self._daemon("slurmd", [self.programs["slurmd"], "-D", "-N", self.host, "-f",
                                str(self.conf)])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for name, proc in self.daemons:
                if proc.poll() is not None:
                    raise AssertionError(f"{name} exited {proc.returncode}:\n{self.logs()}")
            state = self.command("sinfo", "-h", "-N", "-o", "%T", check=False).stdout.strip()
            if state == "idle":
                return
            time.sleep(0.5)
        raise AssertionError(f"the node is not idle after 60 s (sinfo: {state!r}):\n"
                             f"{self.logs()}")

    def _auth(self) -> str:
        """auth/none where this Slurm has it, else munge with a key of this cluster's own."""
        plugins = _plugin_dir(self.programs["slurmctld"])
        tail = "AuthInfo=cred_expire=5"  # a requeued job waits this long to start again
        if plugins and (plugins / "auth_none.so").is_file() and \
                (plugins / "cred_none.so").is_file():
            return f"AuthType=auth/none\nCredType=cred/none\n{tail}"
        munged = shutil.which("munged", path=SLURM_PATH)
        if not munged:
            pytest.skip("this Slurm has no auth/none plugin and munged is not installed")
        key = self.folder / "munge" / "munge.key"
        key.parent.mkdir(mode=0o700)
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        socket_path = key.parent / "munge.socket"
        self._daemon("munged", [munged, "-F", "--force", f"--key-file={key}",
                                f"--socket={socket_path}", f"--pid-file={key.parent}/munged.pid",
                                f"--log-file={key.parent}/munged.log",
                                f"--seed-file={key.parent}/munged.seed"])
        deadline = time.monotonic() + 20
        while not socket_path.exists():
            if time.monotonic() > deadline or self.daemons[-1][1].poll() is not None:
                raise AssertionError(f"munged did not start:\n{self.logs()}")
            time.sleep(0.1)
        return f"AuthType=auth/munge\nCredType=cred/munge\n{tail},socket={socket_path}"

    def _daemon(self, name: str, cmd: list[str]) -> None:
        log = open(self.folder / f"{name}.out", "w")
        self.daemons.append((name, subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                                    env=self.env, cwd=self.folder,
                                                    start_new_session=True)))
        log.close()

    def stop(self) -> None:
        """Cancel every job, stop the daemons, and end whatever the jobs left running."""
        if any(proc.poll() is None for name, proc in self.daemons if name == "slurmctld"):
            jobs = self.command("squeue", "-h", "-o", "%i", check=False).stdout.split()
            if jobs:
                self.command("scancel", *jobs, check=False)
                deadline = time.monotonic() + 20
                while self.command("squeue", "-h", "-o", "%i", check=False).stdout.split() \
                        and time.monotonic() < deadline:
                    time.sleep(0.5)
        for name, proc in reversed(self.daemons):  # slurmd, slurmctld, munged
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        # job steps (slurmstepd, tasks) outlive slurmd
        kill_until_gone(self.leftovers, timeout_s=20, pause_s=0.2)

    def leftovers(self) -> list[int]:
        """Processes started by this cluster that still run: their environment names its
        configuration file."""
        marker = f"SLURM_CONF={self.conf}\0".encode()
        found = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit() and int(entry.name) != os.getpid():
                try:
                    if marker in (entry / "environ").read_bytes() + b"\0":
                        found.append(int(entry.name))
                except OSError:
                    continue
        return found

    def logs(self) -> str:
        return "\n".join(f"--- {path.name}\n{path.read_text(errors='replace')[-3000:]}"
                         for path in sorted(self.folder.glob("*.out"))
                         + sorted(self.folder.glob("*.log")))

    # -- jobs -----------------------------------------------------------------------------
    def command(self, program: str, *args: str, check: bool = True,
                env: dict | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
        """Run one of Slurm's commands against this cluster; ``check``: fail unless it exits 0."""
        done = subprocess.run([self.programs[program], *args], capture_output=True, text=True,
                              env=env or self.env, cwd=cwd or self.folder, timeout=60)
        if check and done.returncode != 0:
            raise AssertionError(f"{program} {' '.join(args)} exited {done.returncode}: "
                                 f"{done.stderr.strip()}\n{self.logs()}")
        return done

    def submit(self, script: str, folder: Path, max_epochs: int) -> int:
        """``sbatch`` the script from ``folder`` (its output: folder/slurm-JOBID.out)."""
        path = folder / "job.sh"
        path.write_text(script)
        env = {**self.env, "GNNSCALE_MAX_EPOCHS": str(max_epochs)}
        done = self.command("sbatch", "--parsable", str(path), env=env, cwd=folder)
        return int(done.stdout.strip().split(";")[0])

    def job(self, job_id: int) -> dict[str, str]:
        """``scontrol show job``'s fields of the job."""
        line = self.command("scontrol", "-o", "show", "job", str(job_id)).stdout
        return dict(re.findall(r"(\w+)=(\S*)", line))

    def wait(self, job_id: int, timeout: float, restarts: int = 0) -> dict[str, str]:
        """The job's fields once it ended (after ``restarts`` requeues)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            info = self.job(job_id)
            if info["JobState"] in FINAL_STATES and int(info.get("Restarts", 0)) >= restarts:
                return info
            time.sleep(0.5)
        raise AssertionError(f"job {job_id} did not end in {timeout} s: {info}\n{self.logs()}")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    programs = {name: shutil.which(name, path=SLURM_PATH) for name in PROGRAMS}
    missing = [name for name, path in programs.items() if not path]
    if missing:
        pytest.skip(f"Slurm is not installed (no {', '.join(missing)}); `make slurm` installs "
                    f"it as root where apt-get exists")
    if os.geteuid() != 0:
        pytest.skip("a one-machine Slurm cluster needs root (slurmd starts the jobs' steps)")
    cluster = Cluster(tmp_path_factory.mktemp("slurm"), programs)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
    assert not cluster.leftovers(), "processes of the cluster still run after it stopped"


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """Cora in 2 parts, the partition store the script trains from, partitioned while the
    cluster starts: a function that waits for it and returns its folder."""
    out = tmp_path_factory.mktemp("store") / "cora-2"
    proc = subprocess.Popen([sys.executable, "-m", "gnnscale", "partition", "--dataset", "cora",
                             "--data-root", str(DATASETS_ROOT), "--parts", "2", "--out",
                             str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=mpi_env())

    def ready() -> Path:
        if proc.returncode is None:
            _, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err
        return out

    yield ready
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def metrics(run: Path) -> tuple[list[dict], dict]:
    """The run's metrics file: its epoch records and its final summary."""
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return records[:-1], records[-1]


@pytest.fixture(scope="module")
def first_job(store, cluster, tmp_path_factory):
    """The script run once by sbatch, 3 epochs: (job fields, its output, its run folder)."""
    folder = tmp_path_factory.mktemp("job")
    run = folder / "run"
    job_id = cluster.submit(batch_script(store(), run), folder, max_epochs=3)
    info = cluster.wait(job_id, timeout=180)
    return info, (folder / f"slurm-{job_id}.out").read_text(), run


def test_the_readme_batch_script_trains_on_two_ranks(first_job, cluster):
    info, out, run = first_job
    assert info["JobState"] == "COMPLETED" and info["ExitCode"] == "0:0", \
        f"{info}\n{out}\n{cluster.logs()}"
    assert f"no checkpoint found in {run}; starting at epoch 1" in out, out
    assert re.search(r"^model sage, 3 layers, hidden 256, .*, 3 epochs, 2 ranks$", out,
                     flags=re.M), out
    assert "done: 3 epochs" in out, out
    records, summary = metrics(run)
    assert [r["epoch"] for r in records] == [1, 2, 3] and summary["ranks"] == 2, summary
    assert (run / "latest.pt").is_file()


def test_a_requeued_job_resumes_from_its_checkpoint(first_job, cluster, store, tmp_path):
    # Enough epochs after the first checkpoint that the requeue lands before the run ends:
    # about 6 s of training at the fastest epoch the first job ran.
    records, _ = metrics(first_job[2])
    fastest = min(r["epoch_time_s"] for r in records[1:])
    epochs = CHECKPOINT_EVERY + min(200, max(4, math.ceil(6 / fastest)))
    run = tmp_path / "run"
    job_id = cluster.submit(batch_script(store(), run), tmp_path, max_epochs=epochs)
    deadline = time.monotonic() + 180
    while not (run / "latest.pt").is_file():
        info = cluster.job(job_id)
        assert info["JobState"] in ("PENDING", "RUNNING", "CONFIGURING") and \
            time.monotonic() < deadline, f"no checkpoint yet: {info}\n{cluster.logs()}"
        time.sleep(0.1)
    cluster.command("scontrol", "requeue", str(job_id))
    info = cluster.wait(job_id, timeout=240, restarts=1)
    out = (tmp_path / f"slurm-{job_id}.out").read_text()
    assert info["JobState"] == "COMPLETED" and info["ExitCode"] == "0:0", \
        f"{info}\n{out}\n{cluster.logs()}"
    assert info["Restarts"] == "1", info
    resumed = re.findall(rf"^resumed from {re.escape(str(run))} after epoch (\d+)$", out,
                         flags=re.M)
    assert resumed, out
    assert int(resumed[-1]) % CHECKPOINT_EVERY == 0 and 1 < int(resumed[-1]) < epochs, out
    assert f"done: {epochs} epochs" in out, out
    records, summary = metrics(run)
    assert [r["epoch"] for r in records] == list(range(1, epochs + 1)), \
        [r["epoch"] for r in records]
    assert summary["ranks"] == 2
