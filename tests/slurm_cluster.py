"""A private one-node Slurm cluster (munged, slurmctld, slurmd) for tests and the fault bench.

Everything lives under one directory: its own munge key and socket, slurm.conf (clients find it
through SLURM_CONF), ports, spool and state, so it neither needs nor disturbs a Slurm that may
run on the machine. Needs root and Debian's slurmd, slurmctld, slurm-client and munge; ``start``
returns None with the reason when they are missing or do not come up.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from asrdist.parallel.launch.rendezvous import free_port

DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "scancel")


@dataclass
class Cluster:
    root: Path
    env: dict[str, str]
    extra: Path | None = None  # munged's dir, outside ``root``
    pids: list[int] = field(default_factory=list)
    released: set[tuple[str, str | None]] = field(default_factory=set)

    def run(self, *cmd: str) -> str:
        """A Slurm client command against this cluster; its stdout."""
        return subprocess.run(cmd, env=self.env, capture_output=True, text=True, check=True,
                              timeout=30).stdout

    def job_state(self, job: str) -> tuple[str, int]:
        """(state, restart count) of a job, from scontrol."""
        out = self.run("scontrol", "show", "job", job)
        fields = dict(f.split("=", 1) for f in out.split() if "=" in f)
        return fields.get("JobState", "?"), int(fields.get("Restarts", "0"))

    def release_requeued(self, job: str) -> bool:
        """Start a requeued job now if it waits only for Slurm's fixed two-minute delay after
        a requeue (Reason=BeginTime): the test need not wait it out. True if it did. Once per
        restart, five seconds on: slurmd refuses a job restarted before its last run's
        credential is gone ("Job credential revoked")."""
        fields = dict(f.split("=", 1) for f in self.run("scontrol", "show", "job", job).split()
                      if "=" in f)
        once = (job, fields.get("Restarts"))
        if fields.get("JobState") == "PENDING" and fields.get("Reason") == "BeginTime" \
                and once not in self.released:
            self.run("scontrol", "update", f"JobId={job}", "StartTime=now+5")
            self.released.add(once)
            return True
        return False

    def stop(self) -> None:
        """Cancel this cluster's jobs (their processes outlive the daemons otherwise), then end
        the daemons it started, by pid (never by name)."""
        try:
            self.run("scancel", "--full", "--signal=KILL", "--user=root")
            deadline = time.monotonic() + 20
            while self.run("squeue", "-h") and time.monotonic() < deadline:
                time.sleep(0.2)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired):
            pass
        for pid in reversed(self.pids):
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
        for pid in self.pids:
            for _ in range(50):
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.1)
            else:
                os.kill(pid, signal.SIGKILL)
        if self.extra is not None:
            shutil.rmtree(self.extra, ignore_errors=True)


def _pid(path: Path, deadline: float) -> int | None:
    while time.monotonic() < deadline:
        if path.is_file() and path.read_text().strip():
            return int(path.read_text().split()[0])
        time.sleep(0.1)
    return None


def start(root: Path, cpus: int = 2) -> tuple[Cluster | None, str]:
    """Start the cluster under ``root``; (cluster, "") or (None, why not)."""
    if os.geteuid() != 0:
        return None, "a private Slurm cluster needs root"
    missing = [d for d in DAEMONS if shutil.which(d, path="/usr/sbin:/usr/bin") is None]
    if missing:
        return None, f"not installed: {', '.join(missing)} (apt-get install slurmd slurmctld " \
                     "slurm-client munge)"
    host = socket.gethostname().split(".")[0]
    munge = pwd.getpwnam("munge")
    root.mkdir(parents=True, exist_ok=True)
    # munged runs as user munge: its files live where that user can reach them (pytest's
    # temporary dirs are root's alone)
    outer = Path(tempfile.mkdtemp(prefix="asrdist-munge-"))
    outer.chmod(0o755)
    mdir = outer / "munge"
    mdir.mkdir(mode=0o700)
    (mdir / "munge.key").write_bytes(os.urandom(1024))
    (mdir / "munge.key").chmod(0o400)
    for p in (mdir, mdir / "munge.key"):
        os.chown(p, munge.pw_uid, munge.pw_gid)
    sock = mdir / "munge.socket"
    for d in ("state", "spool", "log"):
        (root / d).mkdir()
    conf = root / "slurm.conf"
    conf.write_text("\n".join([
        "ClusterName=asrdisttest", f"SlurmctldHost={host}",
        f"SlurmctldPort={free_port()}", f"SlurmdPort={free_port()}",
        "AuthType=auth/munge", "CredType=cred/munge", f"AuthInfo=socket={sock}",
        "SlurmUser=root", "SlurmdUser=root", f"StateSaveLocation={root / 'state'}",
        f"SlurmdSpoolDir={root / 'spool'}", f"SlurmctldPidFile={root / 'slurmctld.pid'}",
        f"SlurmdPidFile={root / 'slurmd.pid'}", f"SlurmctldLogFile={root / 'log/ctld.log'}",
        f"SlurmdLogFile={root / 'log/slurmd.log'}", "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none", "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core",
        "ReturnToService=2", "MpiDefault=none", "JobRequeue=1", "KillWait=10",
        # a pending job is looked at every 2 s, not every 60 s (sched_interval's default)
        "SchedulerType=sched/builtin", "SchedulerParameters=sched_interval=2", "MinJobAge=300",
        f"NodeName={host} CPUs={cpus} RealMemory=4000 State=UNKNOWN",
        f"PartitionName=test Nodes={host} Default=YES MaxTime=INFINITE State=UP",
    ]) + "\n")
    env = {**os.environ, "SLURM_CONF": str(conf)}
    cluster = Cluster(root, env, extra=outer)
    deadline = time.monotonic() + 20
    subprocess.run(["runuser", "-u", "munge", "--", "munged", "--force", f"--socket={sock}",
                    f"--key-file={mdir / 'munge.key'}", f"--pid-file={mdir / 'munged.pid'}",
                    f"--log-file={mdir / 'munged.log'}", f"--seed-file={mdir / 'seed'}"],
                   check=False, capture_output=True)
    pid = _pid(mdir / "munged.pid", deadline)
    if pid is None:
        log = mdir / "munged.log"
        return None, f"munged did not start ({log.read_text()[-300:] if log.is_file() else ''})"
    cluster.pids.append(pid)
    for daemon, pidfile in (("slurmctld", "slurmctld.pid"), ("slurmd", "slurmd.pid")):
        subprocess.run([f"/usr/sbin/{daemon}", "-f", str(conf)], env=env, check=False,
                       capture_output=True)
        pid = _pid(root / pidfile, deadline)
        if pid is None:
            cluster.stop()
            return None, f"{daemon} did not start (see {root / 'log'})"
        cluster.pids.append(pid)
    while time.monotonic() < deadline:  # the node registers and becomes idle
        try:
            if "idle" in cluster.run("sinfo", "-h", "-o", "%t"):
                return cluster, ""
        except subprocess.CalledProcessError:
            pass
        time.sleep(0.3)
    cluster.stop()
    return None, f"the node did not become idle (see {root / 'log'})"


def for_module(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A test module's cluster (the body of its module-scoped fixture), the test's Python first
    on its PATH, stopped after the module; the module is skipped where none can run here."""
    made, why = start(tmp_path_factory.mktemp("slurm") / "cluster")
    if made is None:
        pytest.skip(f"no Slurm cluster here: {why}")
    made.env["PATH"] = f"{Path(sys.executable).parent}:{made.env['PATH']}"
    yield made
    made.stop()
