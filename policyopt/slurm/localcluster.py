"""A heterogeneous Slurm cluster on one machine, for tests, benchmarks and trying the controller.

:class:`LocalSlurm` writes a ``slurm.conf`` and ``gres.conf`` into a directory, starts a private
``munged`` (its own key and socket), ``slurmctld`` and one ``slurmd -N NAME`` per node (each node
on its own port, all on this host), and waits until every node is idle. Each node has a typed GPU
GRES (``Gres=gpu:v100:2``) and the GPU type as a node feature; the GRES ``File=`` entries point at
placeholder files because no GPU exists (slurmd logs a warning and accepts them). Processes are
tracked with ``proctrack/linuxproc`` and ``task/none``: no cgroups are needed.

Needs the Slurm daemons (Debian: ``apt-get install slurm-wlm munge``) and root, since slurmd
starts jobs as their submitting user. Every daemon runs in the foreground as a child of this
process; :meth:`LocalSlurm.stop` ends them by pid.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from policyopt.errors import PolicyOptError

__all__ = ["NodeSpec", "LocalSlurm", "slurm_missing", "DEFAULT_NODES"]

_DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "sinfo")


@dataclass(frozen=True)
class NodeSpec:
    """One node: ``gpus`` GPUs of ``gpu_type`` (also the node's feature) and ``cpus`` CPUs."""

    name: str
    gpu_type: str
    gpus: int = 2
    cpus: int = 4


#: two V100 nodes and two K80 nodes of two GPUs each
DEFAULT_NODES: tuple[NodeSpec, ...] = (NodeSpec("v1", "v100"), NodeSpec("v2", "v100"),
                                       NodeSpec("k1", "k80"), NodeSpec("k2", "k80"))


def slurm_missing() -> str | None:
    """Why a local cluster cannot start here (a sentence), or ``None`` when it can."""
    missing = [d for d in _DAEMONS if shutil.which(d) is None]
    if missing:
        return f"Slurm/munge not installed ({', '.join(missing)} not on PATH; apt-get install slurm-wlm munge)"
    if os.geteuid() != 0:
        return "a local Slurm cluster needs root (slurmd starts jobs as their owner)"
    return None


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class _DaemonExited(PolicyOptError):
    """A daemon of the local cluster exited."""


class LocalSlurm:
    """Start/stop a private Slurm cluster in ``root`` (see the module docstring).

    ``partitions`` maps partition name -> node names (default: one partition ``gpu`` with every
    node). ``extra_conf`` lines are appended to ``slurm.conf``. Use as a context manager.
    """

    def __init__(self, root: str | Path, nodes: Sequence[NodeSpec] = DEFAULT_NODES, *,
                 partitions: Mapping[str, Sequence[str]] | None = None,
                 extra_conf: Sequence[str] = (), kill_wait: int = 10) -> None:
        self.root = Path(root).resolve()
        self.nodes = tuple(nodes)
        self.partitions = dict(partitions or {"gpu": [n.name for n in self.nodes]})
        self.extra_conf = list(extra_conf)
        self.kill_wait = int(kill_wait)
        self._procs: list[subprocess.Popen[bytes]] = []
        self.conf_path = self.root / "etc" / "slurm.conf"

    # ------------------------------------------------------------------ config
    @property
    def env(self) -> dict[str, str]:
        """The environment for Slurm commands against this cluster (``SLURM_CONF`` set)."""
        return {**os.environ, "SLURM_CONF": str(self.conf_path)}

    def _write_config(self) -> None:
        r = self.root
        for d in ("etc", "state", "spool", "log", "dev", "munge"):
            (r / d).mkdir(parents=True, exist_ok=True)
        os.chmod(r / "munge", 0o700)
        ctld_port, *node_ports = _free_ports(1 + len(self.nodes))
        lines = [
            f"ClusterName=po{os.getpid()}",
            f"SlurmctldHost={socket.gethostname()}(127.0.0.1)",
            f"SlurmctldPort={ctld_port}",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={r / 'munge' / 'munge.sock'}",
            "SlurmUser=root",
            "SlurmdUser=root",
            f"StateSaveLocation={r / 'state'}",
            f"SlurmdSpoolDir={r / 'spool'}/%n",
            f"SlurmctldPidFile={r / 'log' / 'slurmctld.pid'}",
            f"SlurmdPidFile={r / 'log'}/slurmd-%n.pid",
            f"SlurmctldLogFile={r / 'log' / 'slurmctld.log'}",
            f"SlurmdLogFile={r / 'log'}/slurmd-%n.log",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            "GresTypes=gpu",
            "SchedulerType=sched/backfill",
            "SchedulerParameters=sched_interval=2,bf_interval=2",
            "AccountingStorageType=accounting_storage/none",
            "JobAcctGatherType=jobacct_gather/none",
            "JobCompType=jobcomp/filetxt",
            f"JobCompLoc={r / 'log' / 'jobcomp.txt'}",
            "MpiDefault=none",
            "ReturnToService=2",
            "SlurmdParameters=config_overrides",
            "MinJobAge=86400",
            f"KillWait={self.kill_wait}",
            "JobRequeue=1",
            f"PlugStackConfig={r / 'etc' / 'plugstack.conf'}",
            "SlurmctldTimeout=30",
            "SlurmdTimeout=60",
            "InactiveLimit=0",
        ]
        gres = []
        for node, port in zip(self.nodes, node_ports):
            lines.append(f"NodeName={node.name} NodeHostname={socket.gethostname()} NodeAddr=127.0.0.1 "
                         f"Port={port} CPUs={node.cpus} RealMemory=1000 Gres=gpu:{node.gpu_type}:{node.gpus} "
                         f"Feature={node.gpu_type} State=UNKNOWN")
            for g in range(node.gpus):
                dev = r / "dev" / f"{node.name}-gpu{g}"
                dev.touch()
                gres.append(f"NodeName={node.name} Name=gpu Type={node.gpu_type} File={dev}")
        for i, (name, members) in enumerate(self.partitions.items()):
            lines.append(f"PartitionName={name} Nodes={','.join(members)} Default={'YES' if i == 0 else 'NO'} "
                         "MaxTime=INFINITE State=UP")
        lines += self.extra_conf
        self.conf_path.write_text("\n".join(lines) + "\n")
        (r / "etc" / "gres.conf").write_text("\n".join(gres) + "\n")
        (r / "etc" / "plugstack.conf").write_text("")

    # ------------------------------------------------------------------ lifecycle
    def _spawn(self, argv: list[str], log: str) -> subprocess.Popen[bytes]:
        out = open(self.root / "log" / log, "ab")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=self.env,
                                start_new_session=True)
        out.close()
        self._procs.append(proc)
        return proc

    #: start attempts, each with fresh ports (see :meth:`start`)
    START_ATTEMPTS = 3

    def start(self, timeout: float = 60.0) -> "LocalSlurm":
        """Write the configuration, start munged, slurmctld and the slurmds; wait until idle.

        The ports are found free here but bound by the daemons later, so another process may take
        one in between (slurmctld then exits: "Address already in use"). A daemon that exits while
        the cluster starts ends this attempt; the next one writes the configuration with fresh
        ports, up to :attr:`START_ATTEMPTS` attempts. A start that fails otherwise (a daemon that
        does not answer in ``timeout``) ends the daemons it started before raising."""
        why = slurm_missing()
        if why:
            raise PolicyOptError(why)
        for attempt in range(1, self.START_ATTEMPTS + 1):
            try:
                return self._start_once(timeout)
            except _DaemonExited:
                self._end_daemons()
                if attempt == self.START_ATTEMPTS:
                    raise
            except BaseException:  # a timeout or an interrupt: no daemon outlives a failed start
                self._end_daemons()
                raise
        raise AssertionError("unreachable")  # pragma: no cover

    def _start_once(self, timeout: float) -> "LocalSlurm":
        self._write_config()
        m = self.root / "munge"
        key = m / "munge.key"
        for stale in ("munge.sock", "munge.key", "munged.pid"):  # from an earlier attempt
            (m / stale).unlink(missing_ok=True)
        key.write_bytes(os.urandom(1024))
        os.chmod(key, 0o400)
        self._spawn(["munged", "--foreground", "--force", f"--socket={m / 'munge.sock'}",
                     f"--key-file={key}", f"--pid-file={m / 'munged.pid'}", f"--log-file={m / 'munged.log'}",
                     f"--seed-file={m / 'munged.seed'}"], "munged.out")
        self._wait(lambda: (m / "munge.sock").exists(), 10.0, "munged did not create its socket")
        self._spawn(["slurmctld", "-D", "-i", "-f", str(self.conf_path)], "slurmctld.out")
        self._wait(self._ctld_up, timeout, "slurmctld did not answer")
        for node in self.nodes:
            self._spawn(["slurmd", "-D", "-N", node.name, "-f", str(self.conf_path)], f"slurmd-{node.name}.out")
        self._wait(self._all_idle, timeout, "nodes did not become idle")
        return self

    def _check_alive(self) -> None:
        for p in self._procs:
            if p.poll() is not None:
                name = p.args[0] if isinstance(p.args, (list, tuple)) else p.args
                raise _DaemonExited(f"{name!s} exited with {p.returncode}; see {self.root / 'log'}")

    def _wait(self, ok: object, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._check_alive()
            if ok():  # type: ignore[operator]
                return
            time.sleep(0.3)
        raise PolicyOptError(f"{what} within {timeout:.0f} s; see {self.root / 'log'}")

    def run(self, *argv: str, check: bool = True) -> str:
        """Run a Slurm command against this cluster; its stdout."""
        res = subprocess.run(list(argv), env=self.env, capture_output=True, text=True, timeout=60)
        if check and res.returncode != 0:
            raise PolicyOptError(f"{' '.join(argv)} failed ({res.returncode}): {res.stderr.strip()}")
        return res.stdout

    def _ctld_up(self) -> bool:
        return subprocess.run(["scontrol", "ping"], env=self.env, capture_output=True,
                              text=True, timeout=30).stdout.count("UP") > 0

    def _all_idle(self) -> bool:
        out = self.run("sinfo", "-h", "-N", "-o", "%N %t", check=False)
        states = dict(line.split() for line in out.splitlines() if line.strip())
        return all(states.get(n.name) == "idle" for n in self.nodes)

    def stop(self) -> None:
        """Cancel every job, then end the daemons (slurmds first) by pid."""
        if any(p.poll() is None for p in self._procs):
            subprocess.run(["scancel", "--full", "-u", "root"], env=self.env, capture_output=True, timeout=30)
            subprocess.run(["scancel", "--full", "--state=PENDING", "-u", "root"], env=self.env,
                           capture_output=True, timeout=30)
        self._end_daemons()

    def _end_daemons(self) -> None:
        """End the daemons (slurmds first) by pid: SIGTERM, SIGKILL after 15 s."""
        for proc in reversed(self._procs):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in reversed(self._procs):
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=15)
        self._procs.clear()

    def __enter__(self) -> "LocalSlurm":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
