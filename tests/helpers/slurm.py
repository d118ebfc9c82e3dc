"""A real one-node SLURM cluster in a temporary folder, for the tests that run attnexp's SLURM
sweeps: Debian's munged, slurmctld and slurmd started as root with a generated slurm.conf (this
machine's CPUs and memory, accounting off, ports of their own), and stopped by their PIDs.
`.ci/run` installs slurm-wlm and munge; `skip_reason()` says why a test cannot start one here."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "sinfo", "scancel")


def skip_reason() -> str | None:
    missing = [d for d in DAEMONS if shutil.which(d) is None and not Path(f"/usr/sbin/{d}").exists()]
    if missing:
        return f"SLURM is not installed ({', '.join(missing)} missing): apt-get install slurm-wlm munge (.ci/run does)"
    if os.geteuid() != 0:
        return "a one-node SLURM cluster is started as root here"
    if not Path("/etc/munge/munge.key").is_file():
        return "munge has no key (/etc/munge/munge.key): reinstall munge"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def conf(folder: Path, host: str) -> str:
    mem_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20
    ctld, d = free_port(), free_port()
    return f"""ClusterName=attnexp
SlurmctldHost={host}
SlurmUser=root
SlurmdUser=root
SlurmctldPort={ctld}
SlurmdPort={d}
AuthType=auth/munge
AuthInfo=socket={folder}/munge/munge.sock
CredType=cred/munge
StateSaveLocation={folder}/state
SlurmdSpoolDir={folder}/spool
SlurmctldPidFile={folder}/slurmctld.pid
SlurmdPidFile={folder}/slurmd.pid
SlurmctldLogFile={folder}/log/slurmctld.log
SlurmdLogFile={folder}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
ReturnToService=2
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=1
MessageTimeout=30
NodeName={host} CPUs={os.cpu_count()} RealMemory={int(mem_mb * 0.8)} State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""


@contextmanager
def cluster(folder: Path):
    """Starts munged, slurmctld and slurmd in `folder`; yields the environment their clients need
    (SLURM_CONF); stops every daemon it started, by PID, whatever happens."""
    folder = Path(folder)
    for sub in ("state", "spool", "log", "munge"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    key = folder / "munge" / "munge.key"
    shutil.copyfile("/etc/munge/munge.key", key)
    key.chmod(0o600)
    host = socket.gethostname().split(".")[0]
    (folder / "slurm.conf").write_text(conf(folder, host))
    env = {**os.environ, "SLURM_CONF": str(folder / "slurm.conf")}
    started: list[subprocess.Popen] = []
    try:
        started.append(subprocess.Popen(
            ["munged", "--foreground", "--force", f"--key-file={key}", f"--socket={folder}/munge/munge.sock",
             f"--pid-file={folder}/munge/munged.pid", f"--log-file={folder}/munge/munged.log",
             f"--seed-file={folder}/munge/seed"], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT))
        _wait(lambda: (folder / "munge" / "munge.sock").exists(), 30, "munged did not start")
        for daemon in ("slurmctld", "slurmd"):
            log = open(folder / "log" / f"{daemon}.out", "w")
            started.append(subprocess.Popen([daemon, "-D", "-f", str(folder / "slurm.conf")], env=env, stdout=log,
                                            stderr=subprocess.STDOUT))
        _wait(lambda: "idle" in subprocess.run(["sinfo", "-h", "-o", "%t"], env=env, capture_output=True,
                                               text=True).stdout, 90, "the SLURM node never became idle")
        yield env
    finally:
        left = _stop(started, env, folder)
    if left:  # after a test that passed: the cluster must not outlive it (found: steps retrying a dead controller)
        raise RuntimeError(f"the SLURM cluster left job steps running after its daemons stopped (killed now): {left}")


def _stop(started: list[subprocess.Popen], env: dict, folder: Path) -> list[int]:
    """Cancels every job and waits for them and their job steps to end, then stops the daemons by
    PID. Stopping slurmd while a step still ran left its slurmstepd retrying the dead controller
    and ignoring SIGTERM. Returns the steps still alive after all that (killed here)."""
    subprocess.run(["scancel", "--full", "-u", "root"], env=env, capture_output=True)
    try:
        _wait(lambda: not steps_of(folder) and not subprocess.run(["squeue", "-h"], env=env, capture_output=True,
                                                                  text=True).stdout.strip(), 90, "")
    except RuntimeError:
        pass  # stopped anyway below; what is left is reported
    for p in reversed(started):
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
    left = steps_of(folder)
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return left


def steps_of(folder: Path) -> list[int]:
    """PIDs of the slurmstepd processes of the cluster in `folder` (their environment holds its
    SLURM_CONF; another cluster's steps, or a real one's, are not touched)."""
    mine = f"SLURM_CONF={Path(folder) / 'slurm.conf'}".encode()
    pids = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            if (d / "comm").read_text().startswith("slurmstepd") and mine in (d / "environ").read_bytes().split(b"\0"):
                pids.append(int(d.name))
        except OSError:
            continue
    return pids


def _wait(ok, seconds: float, what: str) -> None:
    end = time.time() + seconds
    while time.time() < end:
        if ok():
            return
        time.sleep(0.5)
    raise RuntimeError(what)
