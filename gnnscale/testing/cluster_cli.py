"""The virtual cluster from a shell: ``python -m gnnscale.testing.cluster COMMAND``.

- ``run --hosts 2 --ranks-per-host 2 [--rate 1gbit] -- PROGRAM ARGS...``: bring a cluster up,
  run ``mpirun`` from ``node0`` across its hosts with PROGRAM, bring it down; exits with
  ``mpirun``'s code. ``--hostfile FILE`` uses your own hostfile (its hosts must be the
  cluster's: ``node0``, ``node1``, ...).
- ``up --hosts 2 [--rate node1=10mbit]``: bring a cluster up and keep it until Ctrl-C (or
  SIGTERM), printing its hostfile, agent and a ready ``mpirun`` line; run commands on a host
  from another terminal with ``exec``.
- ``exec NAME HOST -- COMMAND...``: run a command on a host of a cluster that is up.
- ``clean``: remove what clusters whose owner was killed left behind.

Bad input (no privileges, a rate that is not a rate, a name in use, a hostfile naming an
unknown host) is one line on stderr and exit code 2, with nothing left behind.
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import subprocess
import sys
import threading

from .cluster import (STATE_ROOT, ClusterError, VirtualCluster, clean_leftovers,
                      parse_rate)


def _rates(values: list[str]):
    """``--rate 1gbit`` (every host) or ``--rate node1=10mbit`` (one host), repeatable."""
    if not values:
        return None
    every, per_host = None, {}
    for value in values:
        host, _, rate = value.rpartition("=")
        parse_rate(rate)  # refuse a bad rate before anything is made
        if host:
            per_host[host] = rate
        else:
            every = rate
    if not per_host:
        return every
    return {"*": every, **per_host}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m gnnscale.testing.cluster",
        description="Several hosts on one machine (Linux namespaces), for multi-host launches.")
    sub = parser.add_subparsers(dest="command", required=True)

    def cluster_options(p):
        p.add_argument("--hosts", type=int, default=2, help="number of hosts (default 2)")
        p.add_argument("--rate", action="append", default=[], metavar="[HOST=]RATE",
                       help="link rate, e.g. 1gbit, or node1=10mbit for one host (repeatable)")
        p.add_argument("--cores-per-host", type=int, default=None,
                       help="pin each host to its own N cores (default: every host sees all)")
        p.add_argument("--name", default=None, help="cluster name (default: from the process id)")

    run = sub.add_parser("run", help="bring a cluster up, run mpirun across it, bring it down")
    cluster_options(run)
    run.add_argument("--ranks-per-host", type=int, default=1)
    run.add_argument("--hostfile", default=None, help="your own hostfile (hosts node0, node1..)")
    run.add_argument("--timeout", type=float, default=None, help="seconds before the run is killed")
    run.add_argument("program", nargs=argparse.REMAINDER, help="-- PROGRAM ARGS...")

    up = sub.add_parser("up", help="bring a cluster up and keep it until Ctrl-C")
    cluster_options(up)
    up.add_argument("--ranks-per-host", type=int, default=1)

    ex = sub.add_parser("exec", help="run a command on a host of a cluster that is up")
    ex.add_argument("name")
    ex.add_argument("host")
    ex.add_argument("program", nargs=argparse.REMAINDER)

    sub.add_parser("clean", help="remove what killed clusters left behind")
    return parser


def _program(args) -> list[str]:
    program = args.program[1:] if args.program[:1] == ["--"] else args.program
    if not program:
        raise ClusterError("no program given: put it after --, e.g. -- gnnscale train ...")
    return program


def _cluster(args) -> VirtualCluster:
    return VirtualCluster(hosts=args.hosts, rate=_rates(args.rate), name=args.name,
                          cores_per_host=args.cores_per_host)


def _on_signals(handler) -> None:
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, handler)


def _run(args) -> int:
    program = _program(args)
    cluster = _cluster(args)
    if args.hostfile:
        if not os.path.isfile(args.hostfile):
            raise ClusterError(f"--hostfile {args.hostfile}: no such file")
        cluster.check_hostfile(args.hostfile)  # before anything is made
    stop = threading.Event()
    proc = None

    def interrupted(signum, frame):
        stop.set()
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)

    _on_signals(interrupted)
    with cluster:
        argv = cluster.mpirun_argv(args.ranks_per_host, hostfile=args.hostfile) + program
        print(f"virtual cluster {cluster.name}: {len(cluster.hosts)} hosts "
              f"({', '.join(h.name for h in cluster.hosts)}), running on node0: "
              f"{shlex.join(argv)}", file=sys.stderr, flush=True)
        proc = cluster.popen("node0", argv)
        try:
            code = proc.wait(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            print(f"virtual cluster {cluster.name}: killed after {args.timeout} s",
                  file=sys.stderr)
            code = 124
    return 130 if stop.is_set() and code != 0 else code


def _up(args) -> int:
    cluster = _cluster(args)
    stop = threading.Event()
    _on_signals(lambda signum, frame: stop.set())
    with cluster:
        argv = cluster.mpirun_argv(args.ranks_per_host)
        me = f"{sys.executable} -m gnnscale.testing.cluster"
        print(f"virtual cluster {cluster.name} is up: "
              + ", ".join(f"{h.name} {h.address}" for h in cluster.hosts)
              + f"\n  hostfile: {cluster.hostfile_path}\n  agent:    {cluster.agent}"
              f"\n  each host's own disk at {cluster.local_dir}"
              f"\n  run across it:  {me} exec {cluster.name} node0 -- {shlex.join(argv)} PROGRAM"
              f"\n  a shell on a host: {me} exec {cluster.name} node1 -- bash"
              "\nCtrl-C brings it down.", flush=True)
        stop.wait()
    print(f"virtual cluster {cluster.name} is down", flush=True)
    return 0


def _exec(args) -> int:
    agent = STATE_ROOT / args.name / "agent"
    if not agent.exists():
        raise ClusterError(f"no virtual cluster named {args.name!r} is up")
    return subprocess.call([str(agent), args.host, shlex.join(_program(args))])


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "run":
            return _run(args)
        if args.command == "up":
            return _up(args)
        if args.command == "exec":
            return _exec(args)
        removed = clean_leftovers()
        print(f"removed {len(removed)} cluster(s): {' '.join(removed)}" if removed
              else "nothing to remove")
        return 0
    except ClusterError as error:
        print(f"gnnscale.testing.cluster: error: {error}", file=sys.stderr)
        return 2
