"""A private Slurm for the tests: munged, slurmctld and three slurmd node
names on localhost, each with its own port, with the configuration, munge
key, sockets, spool and state in one temporary directory (SLURM_CONF points
there; nothing is written under /etc). Debian's slurm-wlm 22.05 runs
several slurmd node names on one host (NodeHostname=localhost, distinct
ports); without cgroups in a container, processes are tracked by
proctrack/linuxproc and tasks bound by nothing (task/none). There is no
slurmdbd: finished jobs stay visible to `scontrol show job` for MinJobAge.

Every daemon runs in the foreground as a child of the test and is stopped
by its pid at the end.
"""

import os
import re
import shutil
import signal
import subprocess

import rdzvtest as rt

NODES = ("n1", "n2", "n3")
PROGRAMS = ("munged", "mungekey", "slurmctld", "slurmd", "sbatch", "srun",
            "scontrol", "scancel", "squeue")


def missing():
    """Why this machine cannot run the private Slurm, or None."""
    if os.geteuid() != 0:
        return "slurmd must run as root to start jobs (not root here)"
    for p in PROGRAMS:
        if shutil.which(p) is None and not os.path.exists("/usr/sbin/" + p):
            return "%s not installed (deploy/install-deps.sh test installs " \
                "slurm-wlm and munge)" % p
    return None


def which(p):
    return shutil.which(p) or "/usr/sbin/" + p


CONF = """\
ClusterName=rdzvtest
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={munge_socket}
SlurmUser=root
SlurmdUser=root
StateSaveLocation={dir}/state
SlurmdSpoolDir={dir}/spool/%n
SlurmctldPidFile={dir}/slurmctld.pid
SlurmdPidFile={dir}/slurmd-%n.pid
SlurmctldLogFile={dir}/slurmctld.log
SlurmdLogFile={dir}/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/builtin
SelectType=select/linear
ReturnToService=2
MinJobAge=3600
KillWait=5
InactiveLimit=0
SlurmdTimeout=300
SlurmctldTimeout=120
SlurmdParameters=config_overrides
JobRequeue=1
{nodes}
PartitionName=test Nodes={names} Default=YES MaxTime=INFINITE State=UP
"""


class Slurm:
    """The private Slurm. self.env is what a Slurm command needs (SLURM_CONF);
    self.run(...) runs one."""

    def __init__(self, tmp):
        self.dir = os.path.join(str(tmp), "slurm")
        for d in ("state", "spool", "munge", "out"):
            os.makedirs(os.path.join(self.dir, d), exist_ok=True)
        os.chmod(self.dir, 0o755)
        self.procs = []
        self.munge_socket = os.path.join(self.dir, "munge", "munge.sock")
        self.conf = os.path.join(self.dir, "slurm.conf")
        self.env = dict(os.environ, SLURM_CONF=self.conf)
        for k in list(self.env):
            if k.startswith(("SLURM_", "SBATCH_", "SRUN_", "SALLOC_")) and \
                    k != "SLURM_CONF":
                del self.env[k]
        try:
            self._munge()
            for attempt in range(3):
                self._config()
                try:
                    self._start()
                    break
                except RuntimeError as e:
                    # Another test bound a port picked here first.
                    if "Address already in use" not in str(e) or \
                            attempt == 2:
                        raise
                    self._stop_slurm()
        except BaseException:
            self.stop()
            raise

    def _munge(self):
        key = os.path.join(self.dir, "munge", "munge.key")
        subprocess.run([which("mungekey"), "--create", "--keyfile", key],
                       check=True, capture_output=True)
        os.chmod(key, 0o600)
        os.chmod(os.path.join(self.dir, "munge"), 0o700)
        p = rt.Proc([which("munged"), "--foreground", "--force",
                     "--socket", self.munge_socket, "--key-file", key,
                     "--pid-file", os.path.join(self.dir, "munge", "munged.pid"),
                     "--log-file", os.path.join(self.dir, "munge", "munged.log"),
                     "--seed-file", os.path.join(self.dir, "munge", "seed")])
        self.procs.append(p)
        rt.wait_for(lambda: os.path.exists(self.munge_socket) or p.p.poll() is not None,
                    10, 0.05, "munged's socket")
        if p.p.poll() is not None:
            raise RuntimeError("munged exited %s:\n%s" % (p.p.returncode, p.output()))

    def _config(self):
        ports = rt.quiet_ports(2 + len(NODES))
        self.ctld_port = ports[0]
        lines = []
        for name, port in zip(NODES, ports[2:]):
            lines.append("NodeName=%s NodeHostname=localhost NodeAddr=127.0.0.1 "
                         "Port=%d CPUs=1 RealMemory=100 State=UNKNOWN" % (name, port))
        with open(self.conf, "w") as f:
            f.write(CONF.format(ctld_port=ports[0], slurmd_port=ports[1],
                                munge_socket=self.munge_socket, dir=self.dir,
                                nodes="\n".join(lines),
                                names=",".join(NODES)))

    def _start(self):
        ctld = rt.Proc([which("slurmctld"), "-D", "-i", "-f", self.conf],
                       env=self.env)
        self.procs.append(ctld)
        rt.wait_for(lambda: self.run("scontrol", "ping", check=False).returncode == 0
                    or ctld.p.poll() is not None, 30, 0.2, "slurmctld answers")
        if ctld.p.poll() is not None:
            raise RuntimeError("slurmctld exited %s:\n%s\n%s" % (
                ctld.p.returncode, ctld.output(), self.log("slurmctld.log")))
        for name in NODES:
            d = rt.Proc([which("slurmd"), "-D", "-N", name, "-f", self.conf],
                        env=self.env)
            self.procs.append(d)

        def idle():
            for p in self.procs:
                if p.p.poll() is not None:
                    raise RuntimeError("a Slurm daemon exited %s:\n%s" % (
                        p.p.returncode, p.output()[-3000:]))
            out = self.run("sinfo", "-h", "-N", "-o", "%N %t", check=False).stdout
            states = dict(l.split() for l in out.splitlines() if l.strip())
            return all(states.get(n) == "idle" for n in NODES)
        try:
            rt.wait_for(idle, 60, 0.25, "three idle slurmd nodes")
        except TimeoutError:
            raise RuntimeError("nodes not idle:\n%s\n%s\n%s" % (
                self.run("sinfo", "-N", check=False).stdout,
                self.log("slurmctld.log")[-3000:], self.log("slurmd-n1.log")[-3000:]))

    def log(self, name):
        try:
            with open(os.path.join(self.dir, name), errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def run(self, *argv, check=True, timeout=30, env=None):
        e = dict(self.env, **(env or {}))
        cp = subprocess.run(list(argv), capture_output=True, text=True,
                            env=e, timeout=timeout, stdin=subprocess.DEVNULL)
        if check and cp.returncode != 0:
            raise AssertionError("%s exited %d:\n%s%s" % (
                " ".join(argv), cp.returncode, cp.stdout, cp.stderr))
        return cp

    def sbatch(self, script, *args, env=None):
        """Submits |script| (a path); returns the job id."""
        cp = self.run("sbatch", "--parsable", *args, script, env=env)
        return cp.stdout.strip().split(";")[0]

    def job(self, job_id):
        """`scontrol show job -o ID` as a dict (JobState, ExitCode, ...)."""
        cp = self.run("scontrol", "show", "job", "-o", str(job_id))
        return dict(re.findall(r"(\w+)=(\S*)", cp.stdout))

    def wait_state(self, job_id, states, timeout):
        """Waits until the job's JobState is one of |states|; returns the
        job's record."""
        last = {}

        def ok():
            last["job"] = self.job(job_id)
            return last["job"] if last["job"].get("JobState") in states else None
        try:
            return rt.wait_for(ok, timeout, 0.2, "job %s in %s" % (job_id, states))
        except TimeoutError as e:
            raise AssertionError("%s; last %s" % (e, last.get("job")))

    def _stop_slurm(self):
        """Stops slurmctld and the slurmds, keeping munged."""
        munge, self.procs = self.procs[:1], self.procs[1:]
        self.stop()
        self.procs = munge

    def stop(self):
        """Stops every daemon by its pid, slurmd and slurmctld first."""
        for p in reversed(self.procs):
            if p.p.poll() is None:
                p.signal(signal.SIGTERM)
        for p in reversed(self.procs):
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.signal(signal.SIGKILL)
                p.wait(5)
        self.procs = []
