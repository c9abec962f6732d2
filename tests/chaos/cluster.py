"""The chaos soak's cluster (docs/RELIABILITY.md): node hosts, rdzvd
(three replicas on a private etcd, or one on SQLite) and the jobs' agents,
each in a network namespace of tests/netns; every line any of them prints
and every step a worker takes goes into one history of JSON lines.

The agents are kept alive as a scheduler would keep a job's nodes: one
that exits (killed, evicted, fenced and given up) is started again after
a short pause, as a new node, unless its host is down or the run ends."""

import json
import os
import shutil
import signal
import subprocess
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
BUILD = os.environ.get("RDZV_BUILD_ROOT", os.path.join(ROOT, "build"))
RDZVD = os.path.join(BUILD, "daemon", "rdzvd")
AGENT = os.path.join(BUILD, "client", "agent", "rdzv-agent")
RDZVCTL = os.path.join(BUILD, "client", "ctl", "rdzvctl")
SHIM = os.path.join(BUILD, "tests", "integration", "agent", "libslowsync.so")
WORKER = os.path.join(HERE, "worker.py")
ETCD = shutil.which("etcd") or "/usr/bin/etcd"
PY = "/usr/bin/python3"

LEASE_S = 3.0
PORT = 7000

# The jobs: (id, kind, hosts, nnodes, stop timeout s). The elastic job's
# fourth host is its spare: it joins a job that is full and waits there.
JOBS = [
    ("elastic", "elastic", ["h0", "h1", "h2", "h7"], "2:3", 10.0),
    ("plain", "plain", ["h3", "h4"], "1:2", 2.0),
    ("torchrun", "torchrun", ["h5", "h6"], "2", 2.0),
]
MAX_RESTARTS = 1000


class History:
    """One file of JSON lines, written by many threads."""

    def __init__(self, path):
        self.f = open(path, "a", buffering=1)
        self.lock = threading.Lock()

    def write(self, rec):
        rec.setdefault("t", time.time())
        line = json.dumps(rec, sort_keys=True)
        with self.lock:
            self.f.write(line + "\n")

    def close(self):
        with self.lock:
            self.f.close()


class Proc:
    """A process whose every output line goes into the history, tagged."""

    def __init__(self, hist, argv, tags, env=None, keep=200):
        self.hist, self.tags = hist, dict(tags)
        e = dict(os.environ)
        e.update({k: str(v) for k, v in (env or {}).items()})
        self.argv = [str(a) for a in argv]
        self.p = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL,
                                  stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, env=e,
                                  start_new_session=True)
        self.pid = self.p.pid
        self.lines = []
        self.keep = keep
        self.cv = threading.Condition()
        self.hist.write(dict(self.tags, kind="started", pid=self.pid))
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for raw in iter(self.p.stdout.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip("\n")
            self.hist.write(dict(self.tags, kind="line", pid=self.pid,
                                 line=line))
            with self.cv:
                self.lines.append(line)
                del self.lines[:-self.keep]
                self.cv.notify_all()
        self.p.stdout.close()

    def wait_line(self, text, timeout):
        deadline = time.monotonic() + timeout
        i = 0
        with self.cv:
            while True:
                for line in self.lines[i:]:
                    if text in line:
                        return line
                i = len(self.lines)
                left = deadline - time.monotonic()
                if left <= 0 or self.p.poll() is not None:
                    raise RuntimeError("no line with %r from %s within %.0f s "
                                       "(exit %s):\n%s" % (
                                           text, self.tags, timeout,
                                           self.p.poll(),
                                           "\n".join(self.lines[-30:])))
                self.cv.wait(min(left, 0.2))

    def alive(self):
        return self.p.poll() is None

    def kill(self, sig=signal.SIGKILL):
        if self.p.poll() is None:
            try:
                os.killpg(self.pid, sig)
            except ProcessLookupError:
                pass

    def reap(self, timeout=10):
        try:
            rc = self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            rc = self.p.wait(timeout)
        self.hist.write(dict(self.tags, kind="exited", pid=self.pid, rc=rc))
        return rc


class Cluster:
    def __init__(self, net, tmp, hist, config, rng):
        self.net, self.tmp, self.hist, self.config = net, tmp, hist, config
        self.rng = rng
        self.out = os.path.join(tmp, "workers")
        os.makedirs(self.out)
        self.lock = threading.RLock()
        self.ending = False
        self.agents = {}        # host -> Proc
        self.hold = {}          # host -> monotonic time before no restart
        self.host_job = {}
        self.jobs = {}
        self.daemons = {}       # replica name -> Proc
        self.etcd = None
        for job, kind, hosts, nnodes, stop in JOBS:
            self.jobs[job] = dict(kind=kind, hosts=hosts, nnodes=nnodes,
                                  stop_s=stop)
            for h in hosts:
                self.host_job[h] = job
        for h in sorted(self.host_job):
            self._host(h)
        names = "".join("%s %s\n" % (self.net[h].addr, h)
                        for h in sorted(self.host_job))
        for h in sorted(self.host_job):
            with open("/etc/netns/%s/hosts" % self.net[h].ns, "a") as f:
                f.write(names)
        if config == "etcd":
            self.replicas = ["r0", "r1", "r2"]
            e = self._host("e0")
            client = "http://%s:2379" % e.addr
            self.etcd_argv = e.wrap + [
                ETCD, "--name", "e0", "--data-dir",
                os.path.join(tmp, "etcd"), "--listen-client-urls", client,
                "--advertise-client-urls", client, "--listen-peer-urls",
                "http://%s:2380" % e.addr, "--initial-advertise-peer-urls",
                "http://%s:2380" % e.addr, "--initial-cluster",
                "e0=http://%s:2380" % e.addr, "--heartbeat-interval", "100",
                "--election-timeout", "1000"]
            self.start_etcd()
        else:
            self.replicas = ["rdzvd"]
            self.slow_file = os.path.join(tmp, "slow-fsync")
        for r in self.replicas:
            self._host(r)
            self.start_rdzvd(r)
        self.server = ",".join("%s:%d" % (net[r].addr, PORT)
                               for r in self.replicas)
        for job, j in self.jobs.items():
            self.hist.write(dict(src="meta", kind="job", job=job,
                                 jobkind=j["kind"], hosts=j["hosts"],
                                 nnodes=j["nnodes"], stop_s=j["stop_s"],
                                 lease_s=LEASE_S, max_restarts=MAX_RESTARTS))

    def _host(self, name):
        return self.net.add(name, hosts_file="127.0.0.1 localhost\n")

    # -- rdzvd and etcd

    def start_etcd(self):
        self.etcd = Proc(self.hist, self.etcd_argv, dict(src="etcd"))
        self.etcd.wait_line("ready to serve client requests", 30)

    def start_rdzvd(self, name):
        h = self.net[name]
        sock = os.path.join(self.tmp, name + ".sock")
        argv = h.wrap + [RDZVD, "--listen", "%s:%d" % (h.addr, PORT),
                         "--listen", "unix:" + sock, "--insecure",
                         "--keepalive", "500ms", "--log-level", "info",
                         "--admin", "uid:%d" % os.getuid()]
        env = {}
        if self.config == "etcd":
            argv += ["--store", "etcd://%s:2379/rdzv-chaos"
                     % self.net["e0"].addr, "--leader-lease", "2s"]
        else:
            argv += ["--db", os.path.join(self.tmp, "rdzv.db")]
            if os.path.exists(SHIM):
                env = {"LD_PRELOAD": SHIM, "SLOWSYNC_FILE": self.slow_file,
                       "SLOWSYNC_MS": "700", "SLOWSYNC_KEEP": "1"}
        p = Proc(self.hist, argv, dict(src="rdzvd", replica=name), env=env)
        p.sock = "unix:" + sock
        self.daemons[name] = p
        p.wait_line("listening on", 30)
        return p

    def leader(self):
        """The replica that leads now (the only one, on SQLite)."""
        if self.config != "etcd":
            return "rdzvd"
        for r in self.replicas:
            d = self.daemons.get(r)
            if d is None or not d.alive():
                continue
            got = subprocess.run([RDZVCTL, "--server", d.sock, "server",
                                  "-o", "json", "--connect-timeout", "2"],
                                 capture_output=True, text=True, timeout=10)
            if got.returncode == 0:
                try:
                    if json.loads(got.stdout).get("role") == "leader":
                        return r
                except ValueError:
                    pass
        return None

    # -- agents

    def start_agent(self, host):
        job = self.host_job[host]
        j = self.jobs[job]
        env = {"CHAOS_OUT": self.out, "CHAOS_JOB": job, "CHAOS_HOST": host,
               "CHAOS_MODE": "elastic" if j["kind"] == "elastic" else "plain",
               "CHAOS_STEP_S": os.environ.get("CHAOS_STEP_S", "0.05"),
               "CHAOS_COLLECTIVE_S": os.environ.get("CHAOS_COLLECTIVE_S",
                                                    "2"),
               "PYTHONPATH": os.path.join(ROOT, "python"),
               "OMP_NUM_THREADS": "1",
               "RDZV_AGENT": AGENT}
        rank = j["hosts"].index(host)
        if j["kind"] == "torchrun":
            argv = [PY, "-m", "rdzv.torchrun", "--nnodes", j["nnodes"],
                    "--nproc-per-node", "1", "--rdzv-backend", "rdzv",
                    "--rdzv-endpoint", self.server, "--rdzv-id", job,
                    "--max-restarts", MAX_RESTARTS, "--monitor-interval",
                    "0.5", "--rdzv-conf",
                    "last_call_timeout=1,join_timeout=600,reconnect_grace=1,"
                    "lease_ttl=%g,node_rank=%d" % (LEASE_S, rank), WORKER]
        else:
            argv = [AGENT, "join", "--id", job, "--server", self.server,
                    "--nnodes", j["nnodes"], "--nproc-per-node", 1,
                    "--max-restarts", MAX_RESTARTS, "--last-call", "1s",
                    "--join-timeout", "600s", "--reconnect-grace", "1s",
                    "--lease-ttl", "%gs" % LEASE_S, "--stop-timeout",
                    "%gs" % j["stop_s"], "--node-rank", rank,
                    "--log-dir", os.path.join(self.tmp, "logs-" + host)]
            if j["kind"] == "elastic":
                argv += ["--restart", "in-process"]
            argv += ["--", PY, WORKER]
        # Each node host has its own host name (a UTS namespace), which
        # /etc/hosts of every host resolves: torch 1.13's torchrun gives
        # its workers MASTER_ADDR = rank 0's host name.
        wrap = self.net[host].wrap + ["unshare", "--uts", "sh", "-c",
                                      'hostname "$0" && exec "$@"', host]
        p = Proc(self.hist, wrap + argv,
                 dict(src="agent", job=job, host=host), env=env)
        self.agents[host] = p
        return p

    def start_all(self):
        for host in sorted(self.host_job):
            self.start_agent(host)
        threading.Thread(target=self._supervise, daemon=True).start()

    def _supervise(self):
        while not self.ending:
            with self.lock:
                for host, p in list(self.agents.items()):
                    if self.ending:
                        break
                    if p.alive():
                        continue
                    if host not in self.hold:
                        p.reap()
                        self.hold[host] = time.monotonic() + 1.0
                    elif time.monotonic() >= self.hold[host]:
                        del self.hold[host]
                        self.start_agent(host)
            time.sleep(0.2)

    def down(self, host, seconds):
        """|host|'s agent is not started again for |seconds|."""
        with self.lock:
            self.hold[host] = time.monotonic() + seconds

    def host_pids(self, host):
        r = subprocess.run(["ip", "netns", "pids", self.net[host].ns],
                           capture_output=True, text=True)
        return [int(x) for x in r.stdout.split()]

    def workers(self, host):
        """Pids of |host|'s worker processes (worker.py, not torchrun)."""
        res = []
        for pid in self.host_pids(host):
            try:
                with open("/proc/%d/cmdline" % pid, "rb") as f:
                    argv = f.read().split(b"\0")
            except OSError:
                continue
            # The worker is python running worker.py; not the agent (whose
            # command line ends with it) nor torchrun (which names it).
            if os.path.basename(argv[0]).startswith(b"python") and \
                    any(a.endswith(b"worker.py") for a in argv) and \
                    b"rdzv.torchrun" not in argv:
                res.append(pid)
        return res

    # -- the end

    def close(self):
        self.ending = True
        with self.lock:
            procs = list(self.agents.values()) + list(self.daemons.values())
            if self.etcd is not None:
                procs.append(self.etcd)
        for p in procs:
            p.kill(signal.SIGCONT)
            p.kill()
        for p in procs:
            p.reap()
        # Anything still in a namespace (a worker whose agent died first).
        for h in list(self.net.hosts):
            for pid in self.host_pids(h):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
