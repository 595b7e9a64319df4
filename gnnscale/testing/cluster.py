"""A cluster on one machine: hosts made of Linux namespaces, for real multi-host launches.

Each host of a :class:`VirtualCluster` is a set of namespaces that a process launched on it
lives in, the way a process on a real node lives on that node:

- a **network** namespace with its own loopback and one interface ``eth0`` (a veth pair whose
  other end is a port of a bridge in a switch namespace of the cluster's own), with an address
  from ``198.18.0.0/15``, the range set aside for network benchmarks (RFC 2544). Nothing is
  added to the machine's own network namespace, so nothing outside the cluster can reach it or
  be reached from it; two clusters never share a bridge, so their addresses never meet;
- a **UTS** namespace: its own host name (``node0``, ``node1``, ...), which is what Open MPI,
  ``socket.gethostname()`` and therefore gnnscale's ranks-per-host, threads and host groups see;
- a **mount** namespace: its own ``/dev/shm`` (a tmpfs: shared-memory segments stay inside the
  host), its own ``/etc/hosts`` naming every host of the cluster, and its own local disk: the
  cluster's :attr:`VirtualCluster.local_dir` shows, on each host, that host's own folder
  (:meth:`VirtualCluster.host_disk`), as ``/scratch`` on a real node shows that node's disk.
  Everything else (the checkout, the virtual environment, ``/tmp``) is the machine's, as a
  shared file system is on a real cluster; what starts on a host through the agent (Open
  MPI's daemons and their ranks) has the host's own ``TMPDIR`` (:meth:`VirtualCluster.host_tmp`).

A host's link can be given a rate (``tc qdisc ... tbf`` on both ends of its veth pair, so the
rate holds for what it sends and what it receives, as a NIC's does), changed while a job runs
(:meth:`VirtualCluster.set_rate`) and taken down (:meth:`VirtualCluster.link_down`). The kernel
here has no ``netem``, so no delay is added: latency is the bridge's own.

Open MPI starts its daemons on the hosts exactly as on real ones, through an ssh stand-in (the
*agent*, a script written into the cluster's folder: ``mpirun --prtemca plm_ssh_agent AGENT``)
that runs the daemon's command line inside the named host. :meth:`VirtualCluster.mpirun_argv`
builds the whole command; :meth:`VirtualCluster.run` runs a command on a host.

Everything the cluster creates carries one name prefix (:data:`PREFIX` and the cluster's name),
and its folder records the process that owns it. :meth:`VirtualCluster.down` removes it all:
the processes on every host, the namespaces with their links and queues, the folder. It runs at
exit, on Ctrl-C and after a failure when the cluster is used as a context manager; a cluster
whose owner was killed is removed by the next one brought up (:func:`clean_leftovers`).

Creating namespaces needs root (``CAP_SYS_ADMIN`` and ``CAP_NET_ADMIN``) and the ``ip``,
``tc``, ``unshare`` and ``nsenter`` programs: :func:`check_available` says in one line what is
missing. This module uses the standard library only.

Example::

    with VirtualCluster(hosts=2, rate="1gbit") as cluster:
        argv = cluster.mpirun_argv(ranks_per_host=2) + ["gnnscale", "train", "--dataset", "cora"]
        cluster.run("node0", argv)

or from a shell, ``python -m gnnscale.testing.cluster run --hosts 2 --ranks-per-host 2 --
gnnscale train --dataset cora``.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

PREFIX = "gnnscale-vc-"  # every namespace and folder a cluster creates starts with it
STATE_ROOT = Path("/tmp/gnnscale-vcluster")  # one folder per cluster: agent, hosts, disks
SUBNET = "198.18.0"  # RFC 2544's benchmark range, inside the cluster's own switch only
MAX_HOSTS = 200
_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,19}$")
_RATE = re.compile(r"^(\d+(?:\.\d+)?)\s*(bit|kbit|mbit|gbit|tbit)$", re.I)
_RATE_BITS = {"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "tbit": 1e12}
_TOOLS = ("ip", "tc", "unshare", "nsenter")
FORWARDED = ("GNNSCALE_", "OMP_", "NUMBA_", "MKL_", "PYTHON")  # what mpirun_argv forwards
LOST_HOST_S = 20  # a host silent this long is declared lost (Open MPI daemons' TCP keepalive)


class ClusterError(Exception):
    """The cluster cannot be made or used as asked; the message is one line for the user."""


class ClusterUnavailable(ClusterError):
    """This machine (or this user) cannot create namespaces."""


#: a shaped link's largest packet (veth passes segmentation-offload packets of up to 64 KiB,
#: which a token bucket must hold whole): smaller packets let its bucket be small
SHAPED_GSO_BYTES = 16 << 10
#: a veth's own largest packet, restored when the shaping is removed
UNSHAPED_GSO_BYTES = 64 << 10
#: a shaped link's bucket holds this long at its rate, within SHAPING_BURST_BYTES and at
#: least two packets
SHAPING_BURST_S = 0.001
#: the least and the most a shaped link's bucket holds: less starves the shaping of tokens on
#: a busy core (a 3 KB bucket carries 0.93 of 10 Mbit/s); more lets a halo exchange after an
#: idle gap pass at the veth's speed (a 125 KB bucket passes 128 KiB at ~4x 1 Gbit/s)
SHAPING_BURST_BYTES = (12 << 10, 32 << 10)
#: a shaped link's packets last about this long at its rate: one frame each up to 100 Mbit/s,
#: ``SHAPED_GSO_BYTES`` from 1.3 Gbit/s
SHAPED_PACKET_S = 0.0001


#: the MTU of every host's link (a veth's own)
LINK_MTU = 1500


def tcp_payload_share(mtu: int = LINK_MTU) -> float:
    """The share of a shaped link's rate that carries TCP payload: ``tbf`` counts every
    segment's headers (Ethernet 14 bytes, IP 20, TCP 32 with timestamps) beside its ``mtu - 52``
    bytes of payload, 1448 of 1514 at MTU 1500 (``link_probe`` measures 0.957 Gbit/s of payload
    on a link shaped to 1 Gbit/s: ``benchmarks/results/vcluster_links.json``)."""
    return (mtu - 52) / (mtu + 14)


def shaped_packet_bytes(bits_per_s: int) -> int:
    """The largest packet (``gso_max_size``) a link shaped to ``bits_per_s`` sends: what lasts
    ``SHAPED_PACKET_S`` at the rate, one frame at least, ``SHAPED_GSO_BYTES`` at most. The
    token bucket must hold two, so slow links send single frames and keep their bucket small."""
    return int(min(SHAPED_GSO_BYTES, max(LINK_MTU + 14, bits_per_s / 8 * SHAPED_PACKET_S)))


def shaping_burst(bits_per_s: int) -> int:
    """Bytes of a shaped link's token bucket: what it passes at the veth's own speed after the
    link idled. A real link sends nothing faster than its rate, so the bucket is kept small
    (1 ms at the rate, 12 to 32 KiB, two packets at least): a message of 128 KiB sent after an
    idle gap crosses a 100 Mbit/s or a 1 Gbit/s link at about 1.1x the rate
    (docs/virtual-cluster.md, "Measured")."""
    least, most = SHAPING_BURST_BYTES
    by_time = min(most, max(least, int(bits_per_s / 8 * SHAPING_BURST_S)))
    return max(2 * shaped_packet_bytes(bits_per_s), by_time)


def parse_rate(text: str) -> int:
    """Bits per second from a tc-style rate (``"10mbit"``, ``"1gbit"``, ``"2.5gbit"``)."""
    match = _RATE.match(str(text).strip())
    if not match or float(match.group(1)) <= 0:
        raise ClusterError(f"not a link rate: {text!r} (expected e.g. 10mbit, 1gbit, 2.5gbit)")
    bits = float(match.group(1)) * _RATE_BITS[match.group(2).lower()]
    if bits < 8_000:
        raise ClusterError(f"link rate {text!r} is below 8kbit, too slow for any launch")
    return int(bits)


def _sh(argv: list[str], check: bool = True, **kwargs) -> subprocess.CompletedProcess:
    done = subprocess.run(argv, capture_output=True, text=True, **kwargs)
    if check and done.returncode != 0:
        detail = (done.stderr or done.stdout).strip().splitlines()
        raise ClusterError(f"{' '.join(argv)} failed: {detail[-1] if detail else done.returncode}")
    return done


def check_available() -> None:
    """Raise :class:`ClusterUnavailable` (one line) unless namespaces can be created here."""
    missing = [tool for tool in _TOOLS if shutil.which(tool) is None]
    if missing:
        raise ClusterUnavailable(f"cannot create a virtual cluster: {', '.join(missing)} not "
                                 "found (install iproute2 and util-linux)")
    probe = f"{PREFIX}probe-{os.getpid()}"
    made = _sh(["ip", "netns", "add", probe], check=False)
    if made.returncode != 0:
        reason = (made.stderr.strip().splitlines() or ["permission denied"])[-1]
        raise ClusterUnavailable("cannot create a virtual cluster: creating a network namespace "
                                 f"failed ({reason}); it needs root (CAP_SYS_ADMIN, CAP_NET_ADMIN)")
    try:
        done = _sh(["ip", "netns", "exec", probe, "unshare", "--uts", "--mount", "true"],
                   check=False)
        if done.returncode != 0:
            raise ClusterUnavailable("cannot create a virtual cluster: unshare --uts --mount "
                                     f"failed ({done.stderr.strip() or done.returncode})")
    finally:
        _sh(["ip", "netns", "del", probe], check=False)


def unavailable_reason() -> str | None:
    """None where a cluster can be made here, else the one-line reason (for test skips)."""
    try:
        check_available()
    except ClusterUnavailable as error:
        return str(error)
    return None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _owned_namespaces() -> dict[str, list[str]]:
    """Every namespace a cluster made, grouped by the cluster's name."""
    listed = _sh(["ip", "netns", "list"], check=False).stdout.split("\n")
    groups: dict[str, list[str]] = {}
    for line in listed:
        name = line.split(" ")[0]
        if name.startswith(PREFIX) and not name.startswith(PREFIX + "probe-"):
            cluster = name[len(PREFIX):].rsplit("-", 1)[0]
            groups.setdefault(cluster, []).append(name)
    return groups


def _owner(name: str, state_root: Path) -> int | None:
    try:
        return int((state_root / name / "owner").read_text())
    except (OSError, ValueError):
        return None


def _netns_pids(netns: str) -> list[int]:
    return [int(p) for p in _sh(["ip", "netns", "pids", netns], check=False).stdout.split()]


def kill_until_gone(list_pids, timeout_s: float = 0.3, pause_s: float = 0.1) -> list[int]:
    """SIGKILL whatever ``list_pids()`` names until it names nothing or ``timeout_s`` has
    passed, ``pause_s`` between rounds (a process can fork while it is being killed, and a
    killed one lingers until it is reaped); what it still names at the end."""
    deadline = time.monotonic() + timeout_s
    while (pids := list_pids()) and time.monotonic() < deadline:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(pause_s)
    return pids


def _remove(namespaces: list[str], folder: Path | None) -> None:
    """Kill every process inside ``namespaces``, delete them (and their links), and the folder."""
    kill_until_gone(lambda: [pid for ns in namespaces for pid in _netns_pids(ns)])
    for ns in namespaces:
        _sh(["ip", "netns", "del", ns], check=False)
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)


def clean_leftovers(state_root: Path = STATE_ROOT) -> list[str]:
    """Remove the clusters whose owning process is gone; return their names."""
    removed = []
    groups = _owned_namespaces()
    names = set(groups)
    if state_root.is_dir():
        names.update(p.name for p in state_root.iterdir() if p.is_dir())
    for name in sorted(names):
        owner = _owner(name, state_root)
        if owner is None or not _pid_alive(owner):
            _remove(groups.get(name, []), state_root / name)
            removed.append(name)
    return removed


@dataclass(frozen=True)
class Host:
    """One host of the cluster: its name, address, namespace and the process holding it."""

    name: str
    address: str
    netns: str
    port: str  # the bridge's port for this host, in the switch namespace
    disk: Path  # this host's own folder, shown at the cluster's local_dir on this host


class VirtualCluster:
    """``hosts`` hosts on a private bridge; ``rate`` (e.g. ``"1gbit"``) for every link, or a
    ``{host name: rate}`` mapping (key ``"*"``: every host not named); ``cores_per_host`` pins each host to its own cores (disjoint
    where there are enough, else shared round-robin), like separate machines; ``name`` makes the
    cluster's namespaces and folder unique (default: from this process's id)."""

    def __init__(self, hosts: int = 2, rate=None, name: str | None = None,
                 cores_per_host: int | None = None, state_root: Path | str = STATE_ROOT):
        if not isinstance(hosts, int) or not 1 <= hosts <= MAX_HOSTS:
            raise ClusterError(f"hosts must be 1..{MAX_HOSTS}, got {hosts!r}")
        self.name = name or f"p{os.getpid()}"
        if not _NAME.match(self.name):
            raise ClusterError(f"cluster name {self.name!r}: use 1-20 lower-case letters, digits "
                               "and '-', starting with a letter or digit")
        if cores_per_host is not None and not (isinstance(cores_per_host, int)
                                               and cores_per_host > 0):
            raise ClusterError(f"cores per host must be a positive integer, got {cores_per_host!r}")
        self.state_root = Path(state_root)
        self.folder = self.state_root / self.name
        self.local_dir = self.folder / "local"
        self.hosts = [Host(f"node{i}", f"{SUBNET}.{i + 1}", f"{PREFIX}{self.name}-n{i}", f"p{i}",
                           self.folder / "disks" / f"node{i}") for i in range(hosts)]
        self._by_name = {h.name: h for h in self.hosts}
        self._by_name.update({h.address: h for h in self.hosts})
        self.rates = self._rates(rate)
        self.cores_per_host = cores_per_host
        self.switch = f"{PREFIX}{self.name}-sw"
        self.agent = self.folder / "agent"
        self.hostfile_path = self.folder / "hostfile"
        self._holders: dict[str, subprocess.Popen] = {}
        self._up = False

    # --- bringing it up and down -------------------------------------------------------------

    def _rates(self, rate) -> dict[str, int | None]:
        if rate is None or isinstance(rate, (str, int)):
            bits = None if rate is None else (rate if isinstance(rate, int) else parse_rate(rate))
            return {h.name: bits for h in self.hosts}
        given = dict(rate)
        every = given.pop("*", None)  # "*": every host not named
        rates = {h.name: every for h in self.hosts}
        rates.update({self.host(host).name: value for host, value in given.items()})
        return {host: parse_rate(value) if isinstance(value, str) else value
                for host, value in rates.items()}

    def host(self, name: str) -> Host:
        """The host called ``name`` (or with that address)."""
        try:
            return self._by_name[name]
        except KeyError:
            raise ClusterError(f"no host {name!r} in cluster {self.name} (hosts: "
                               f"{', '.join(h.name for h in self.hosts)})") from None

    def host_tmp(self, name: str) -> Path:
        """Host ``name``'s temporary folder (``TMPDIR`` of what starts there through the agent),
        as each node of a cluster has its own ``/tmp``: a daemon killed on one host leaves its
        session folder there, where no later daemon that happens to get its process id finds
        it, and the cluster's removal takes it away."""
        return self.folder / f"{self.host(name).name}.tmp"

    def host_disk(self, name: str) -> Path:
        """Host ``name``'s own folder, as the machine sees it (the host sees it at local_dir)."""
        return self.host(name).disk

    def up(self) -> "VirtualCluster":
        """Create the namespaces, links, rates, host names, disks, hostfile and agent."""
        check_available()
        clean_leftovers(self.state_root)
        owner = _owner(self.name, self.state_root)
        if self.name in _owned_namespaces() or (owner is not None and _pid_alive(owner)):
            raise ClusterError(f"a virtual cluster named {self.name!r} is already up (owner "
                               f"process {owner}); choose another name or bring that one down")
        # the folder appears with its owner already in it: a cluster coming up at the same
        # time never takes it for a killed run's leftovers
        making = self.folder.with_name(f".{self.name}.{os.getpid()}")
        making.mkdir(parents=True)
        (making / "owner").write_text(str(os.getpid()))
        making.rename(self.folder)
        self._up = True
        try:
            self._make_network()
            self._write_files()
            for host in self.hosts:
                self._start_holder(host)
        except BaseException:
            self.down()
            raise
        return self

    def _make_network(self) -> None:
        ip = ["ip"]
        _sh(ip + ["netns", "add", self.switch])
        _sh(ip + ["-n", self.switch, "link", "add", "br0", "type", "bridge"])
        _sh(ip + ["-n", self.switch, "link", "set", "br0", "up"])
        for host in self.hosts:
            _sh(ip + ["netns", "add", host.netns])
            _sh(ip + ["link", "add", "eth0", "netns", host.netns, "type", "veth", "peer", "name",
                      host.port, "netns", self.switch])
            _sh(ip + ["-n", self.switch, "link", "set", host.port, "master", "br0", "up"])
            _sh(ip + ["netns", "exec", host.netns, "sh", "-c",
                      "echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6"], check=False)
            _sh(ip + ["-n", host.netns, "addr", "add", f"{host.address}/16", "dev", "eth0"])
            _sh(ip + ["-n", host.netns, "link", "set", "eth0", "up"])
            _sh(ip + ["-n", host.netns, "link", "set", "lo", "up"])
            if self.rates[host.name]:
                self.set_rate(host.name, self.rates[host.name])

    def _write_files(self) -> None:
        self.local_dir.mkdir()
        lines = ["127.0.0.1 localhost"] + [f"{h.address} {h.name}" for h in self.hosts]
        (self.folder / "hosts").write_text("\n".join(lines) + "\n")
        for host in self.hosts:
            host.disk.mkdir(parents=True)
            self.host_tmp(host.name).mkdir()
        self._write_agent()

    def _write_agent(self) -> None:
        """The ssh stand-in: ``agent [ssh options] HOST COMMAND...`` runs COMMAND on HOST."""
        cases = "\n".join(f'  {h.name}|{h.address}) pidfile="{self.folder}/{h.name}.pid"; '
                          f'tmpdir="{self.host_tmp(h.name)}"; '
                          f'cpus="{self._cpus(i) or ""}";;' for i, h in enumerate(self.hosts))
        self.agent.write_text(f"""#!/bin/sh
# ssh stand-in for the virtual cluster {self.name}: agent [ssh options] HOST COMMAND...
# runs COMMAND with /bin/sh inside HOST's namespaces (network, host name, mounts), in a
# login environment as ssh would.
while [ $# -gt 0 ]; do
  case "$1" in
    -[bcDEeFIiJLlmOopQRSWw]) shift 2;;
    -*) shift;;
    *) break;;
  esac
done
host="$1"; shift
case "$host" in
{cases}
  *) echo "virtual cluster {self.name}: no host '$host' (hosts: {' '.join(h.name for h in self.hosts)})" >&2; exit 255;;
esac
pid=$(cat "$pidfile" 2>/dev/null) || {{ echo "virtual cluster {self.name}: host '$host' is down" >&2; exit 255; }}
# as ssh does: a login environment, not the caller's (mpirun -x forwards what ranks need),
# on the host's own cores where the cluster gives each host its own, with the host's own
# temporary folder (Open MPI's daemons keep their session folders there)
exec env -i HOME="$HOME" USER="$USER" LOGNAME="$LOGNAME" SHELL=/bin/sh LANG="${{LANG:-C.UTF-8}}" \
  PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin TMPDIR="$tmpdir" \
  ${{cpus:+taskset -c $cpus}} nsenter -t "$pid" -n -u -m -- /bin/sh -c "$*"
""")
        self.agent.chmod(0o755)

    def _cpus(self, index: int) -> str | None:
        if not self.cores_per_host:
            return None
        cores = sorted(os.sched_getaffinity(0))
        start = index * self.cores_per_host
        return ",".join(str(cores[(start + k) % len(cores)]) for k in range(self.cores_per_host))

    def _start_holder(self, host: Host) -> None:
        """A process holding the host's UTS and mount namespaces, set up once; every command
        run on the host enters its namespaces, so they share its /dev/shm and disk."""
        setup = " && ".join([
            f"hostname {host.name}",
            "mount -t tmpfs -o mode=1777 tmpfs /dev/shm",
            f"mount --bind {shlex.quote(str(self.folder / 'hosts'))} /etc/hosts",
            f"mount --bind {shlex.quote(str(host.disk))} {shlex.quote(str(self.local_dir))}",
            f"echo $$ > {shlex.quote(str(self.folder / (host.name + '.pid')))}.tmp",
            f"mv {shlex.quote(str(self.folder / (host.name + '.pid')))}.tmp "
            f"{shlex.quote(str(self.folder / (host.name + '.pid')))}",
            "exec sleep infinity"])
        argv = ["ip", "netns", "exec", host.netns, "unshare", "--uts", "--mount",
                "--propagation", "private", "sh", "-c", setup]
        cpus = self._cpus(self.hosts.index(host))
        if cpus:
            argv = ["taskset", "-c", cpus] + argv
        holder = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, text=True, start_new_session=True)
        self._holders[host.name] = holder
        pidfile = self.folder / f"{host.name}.pid"
        deadline = time.monotonic() + 10
        while not pidfile.exists():
            if holder.poll() is not None:
                raise ClusterError(f"host {host.name} did not start: "
                                   f"{holder.stderr.read().strip() or holder.returncode}")
            if time.monotonic() > deadline:
                raise ClusterError(f"host {host.name} did not start within 10 s")
            time.sleep(0.01)

    def down(self) -> None:
        """Remove everything the cluster made: processes, namespaces, links, folder."""
        if not self._up:
            return
        self._up = False
        _remove([h.netns for h in self.hosts] + [self.switch], self.folder)
        for holder in self._holders.values():
            try:
                holder.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
            if holder.stderr:
                holder.stderr.close()

    def __enter__(self) -> "VirtualCluster":
        return self.up()

    def __exit__(self, *exc) -> None:
        self.down()

    # --- links -------------------------------------------------------------------------------

    def set_rate(self, name: str, rate) -> None:
        """Shape host ``name``'s link to ``rate`` (bits/s or ``"10mbit"``), both directions;
        ``None`` removes the shaping. Connections already open take the new rate's packet
        size too."""
        host = self.host(name)
        bits = None if rate is None else (parse_rate(rate) if isinstance(rate, str) else int(rate))
        for ns, dev in ((host.netns, "eth0"), (self.switch, host.port)):
            if bits is None:
                _sh(["tc", "-n", ns, "qdisc", "del", "dev", dev, "root"], check=False)
                _sh(["ip", "-n", ns, "link", "set", "dev", dev, "gso_max_size",
                     str(UNSHAPED_GSO_BYTES)])
                continue
            _sh(["ip", "-n", ns, "link", "set", "dev", dev, "gso_max_size",
                 str(shaped_packet_bytes(bits))])
            _sh(["tc", "-n", ns, "qdisc", "replace", "dev", dev, "root", "tbf", "rate",
                 f"{bits}bit", "burst", str(shaping_burst(bits)), "latency", "100ms"])
        # a TCP connection keeps the packet size of the link it was opened on; dropping the
        # host's cached routes makes every open one take the new size with its next packet
        # (else a job's connections, opened unshaped, send 64 KiB packets that tbf splits
        # into single frames: twice the travel and the work per byte at 10 Gbit/s)
        _sh(["ip", "-n", host.netns, "route", "flush", "cache"])
        self.rates[host.name] = bits

    def link_down(self, name: str) -> None:
        """Take host ``name``'s link down (its bridge port): the host drops off the network."""
        _sh(["ip", "-n", self.switch, "link", "set", self.host(name).port, "down"])

    def link_up(self, name: str, timeout: float = 10) -> None:
        """Bring host ``name``'s link back; returns once both ends carry traffic again (the
        kernel raises a veth's carrier asynchronously, up to a second later). Every host forgets
        the addresses it failed to resolve while the link was down: a neighbour entry left
        FAILED fails a new connection at once ("no route to host") until the kernel probes
        again, as a daemon launched just after the link came back found."""
        host = self.host(name)
        _sh(["ip", "-n", self.switch, "link", "set", host.port, "up"])
        for other in self.hosts:
            _sh(["ip", "-n", other.netns, "neigh", "flush", "nud", "failed", "nud", "incomplete"],
                check=False)
        deadline = time.monotonic() + timeout
        while not all(self._operstate(ns, dev) == "UP"
                      for ns, dev in ((host.netns, "eth0"), (self.switch, host.port))):
            if time.monotonic() > deadline:
                raise ClusterError(f"the link of {host.name} did not come back within {timeout} s")
            time.sleep(0.02)

    @staticmethod
    def _operstate(netns: str, device: str) -> str:
        shown = _sh(["ip", "-n", netns, "-j", "link", "show", device], check=False)
        try:
            return json.loads(shown.stdout)[0].get("operstate", "")
        except (ValueError, IndexError):
            return ""

    def link_bytes(self, name: str) -> tuple[int, int]:
        """(bytes sent, bytes received) on host ``name``'s link so far."""
        counters = self._link_counters(name)
        return counters["tx"]["bytes"], counters["rx"]["bytes"]

    def link_packets(self, name: str) -> tuple[int, int]:
        """(packets sent, packets received) on host ``name``'s link so far (a packet of
        several frames counts once)."""
        counters = self._link_counters(name)
        return counters["tx"]["packets"], counters["rx"]["packets"]

    def _link_counters(self, name: str) -> dict:
        stats = _sh(["ip", "-n", self.host(name).netns, "-j", "-s", "link", "show", "eth0"])
        return json.loads(stats.stdout)[0]["stats64"]

    # --- running things ----------------------------------------------------------------------

    def hostfile(self, ranks_per_host: int, hosts: list[str] | None = None) -> Path:
        """Write an Open MPI hostfile with ``ranks_per_host`` slots on each host; its path."""
        if not isinstance(ranks_per_host, int) or ranks_per_host < 1:
            raise ClusterError(f"ranks per host must be a positive integer, got {ranks_per_host!r}")
        names = [self.host(h).name for h in (hosts or [h.name for h in self.hosts])]
        self.hostfile_path.write_text("".join(f"{n} slots={ranks_per_host}\n" for n in names))
        return self.hostfile_path

    def check_hostfile(self, path) -> list[str]:
        """The hosts an existing hostfile names; a host the cluster does not have is an error."""
        names = []
        for number, line in enumerate(Path(path).read_text().splitlines(), 1):
            fields = line.split("#")[0].split()
            if not fields:
                continue
            if fields[0] not in self._by_name:
                raise ClusterError(f"hostfile {path} line {number}: host {fields[0]!r} is not in "
                                   f"cluster {self.name} (hosts: "
                                   f"{', '.join(h.name for h in self.hosts)})")
            names.append(fields[0])
        if not names:
            raise ClusterError(f"hostfile {path} names no host")
        return names

    def mpirun_argv(self, ranks_per_host: int = 1, hosts: list[str] | None = None,
                    hostfile=None, extra: list[str] = (), env: dict | None = None,
                    lost_host_s: int = LOST_HOST_S) -> list[str]:
        """``mpirun`` across the cluster's hosts (to be run on ``node0`` with :meth:`run`).

        Daemons start through the agent in a login environment, as over ssh, so the ranks get
        what ``-x`` forwards: ``PATH`` and every ``GNNSCALE_*``, ``OMP_*``, ``NUMBA_*``,
        ``MKL_*`` and ``PYTHON*`` variable of ``env`` (default: this process's environment).
        TCP on ``eth0`` between hosts, shared memory within one; ``ranks_per_host`` ranks on
        each host (or ``hostfile``'s slots). A host that stops answering is declared lost
        after about ``lost_host_s`` seconds (TCP keepalive of Open MPI's daemons: idle time
        ``lost_host_s / 2``, then 5 probes over the other half), and the job ends."""
        if hostfile is not None:
            self.check_hostfile(hostfile)
            path, count = Path(hostfile), None
        else:
            path = self.hostfile(ranks_per_host, hosts)
            count = ranks_per_host * len(hosts or self.hosts)
        env = os.environ if env is None else env
        mpirun = shutil.which("mpirun", path=env.get("PATH")) or \
            str(Path(sys.prefix) / "bin" / "mpirun")
        idle = max(1, int(lost_host_s) // 2)
        argv = [mpirun, "--hostfile", str(path), "--prtemca", "plm_ssh_agent", str(self.agent),
                "--prtemca", "plm_ssh_no_tree_spawn", "1",
                "--prtemca", "oob_tcp_if_include", "eth0",
                "--prtemca", "oob_tcp_keepalive_time", str(idle),
                "--prtemca", "oob_tcp_keepalive_intvl", str(max(1, idle // 5)),
                "--prtemca", "oob_tcp_keepalive_probes", "5",
                "--mca", "btl_tcp_if_include", "eth0",
                "--mca", "btl", "self,sm,tcp"]
        if os.geteuid() == 0:  # the cluster needs root, so its jobs run as root
            argv.append("--allow-run-as-root")
        for name in sorted(env):
            if name == "PATH" or name.startswith(FORWARDED):
                argv += ["-x", name]
        if count is not None:
            argv += ["-n", str(count), "--map-by", f"ppr:{ranks_per_host}:node"]
        if self.cores_per_host:
            argv += ["--bind-to", "none"]
        return argv + list(extra)

    def command(self, host: str, argv: list[str], cwd=None) -> list[str]:
        """The machine-side command line that runs ``argv`` on ``host`` in folder ``cwd``
        (default: this process's working folder; the file system is shared), with the
        caller's environment, as a user's shell on that host has its own."""
        folder = shlex.quote(str(cwd or os.getcwd()))
        pid = (self.folder / f"{self.host(host).name}.pid").read_text().strip()
        cpus = self._cpus(self.hosts.index(self.host(host)))
        return ([*(["taskset", "-c", cpus] if cpus else []), "nsenter", "-t", pid, "-n", "-u",
                 "-m", "--", "/bin/sh", "-c", f"cd {folder} && exec {shlex.join(argv)}"])

    def popen(self, host: str, argv: list[str], cwd=None, **kwargs) -> subprocess.Popen:
        """Start ``argv`` on ``host`` (its own process group, so it can be signalled whole)."""
        kwargs.setdefault("start_new_session", True)
        return subprocess.Popen(self.command(host, argv, cwd), **kwargs)

    def run(self, host: str, argv: list[str], timeout: float | None = None,
            **kwargs) -> subprocess.CompletedProcess:
        """Run ``argv`` on ``host`` and wait; on timeout the whole process group is killed."""
        kwargs.setdefault("capture_output", True)
        kwargs.setdefault("text", True)
        capture = kwargs.pop("capture_output")
        if capture:
            kwargs.setdefault("stdout", subprocess.PIPE)
            kwargs.setdefault("stderr", subprocess.PIPE)
        proc = self.popen(host, argv, **kwargs)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            raise ClusterError(f"timed out after {timeout} s on {host}: {shlex.join(argv)}\n"
                               f"{out or ''}{err or ''}") from None
        return subprocess.CompletedProcess(argv, proc.returncode, out, err)

    def kill_jobs(self) -> None:
        """Kill every process on every host but the ones holding the hosts (what a failed or
        cut-off job left behind), as rebooting a node would."""
        holders = {int((self.folder / f"{h.name}.pid").read_text()) for h in self.hosts}
        kill_until_gone(lambda: [pid for h in self.hosts for pid in self.processes(h.name)
                                 if pid not in holders])

    def processes(self, host: str) -> list[int]:
        """The ids of every process now running on ``host`` (its holder included)."""
        return _netns_pids(self.host(host).netns)


if __name__ == "__main__":
    from gnnscale.testing.cluster_cli import main

    raise SystemExit(main())
