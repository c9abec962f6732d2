#!/usr/bin/python3
"""An agent soak with no fault (issue 40, docs/AGENT.md "Fencing"): N
rdzv-agents of one job on a private rdzvd, at fast settings (lease 3 s,
rdzvd PINGs every 500 ms), workers that only sleep, for a while; then
how many times an agent fenced its healthy workers, which must be none.

A false fence is a wrong verdict of the agents' clock arithmetic (a time
heard later than the fence's own clock read once wrapped to 2^64 ms of
silence), so it needs agent-minutes, not load: the default, 10 agents for
3 minutes, is 30 agent-minutes. Prints the figures; exits 1 on any
fencing, lost node or restart, 2 when the job never formed."""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)


def start_rdzvd(build, tmp, keepalive):
    p = subprocess.Popen([os.path.join(build, "daemon", "rdzvd"), "--db",
                          os.path.join(tmp, "rdzv.db"), "--listen",
                          "127.0.0.1:0", "--http-listen", "none",
                          "--keepalive", keepalive],
                         stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    lines = []
    deadline = time.monotonic() + 30
    for line in p.stderr:
        lines.append(line)
        m = re.search(r"listening on (\S+)", line)
        if m:
            threading.Thread(target=lambda: lines.extend(p.stderr),
                             daemon=True).start()
            return p, m.group(1), lines
        if time.monotonic() > deadline:
            break
    p.kill()
    raise RuntimeError("rdzvd did not start: %s" % "".join(lines))


def status(build, endpoint, job):
    got = subprocess.run([os.path.join(build, "client", "ctl", "rdzvctl"),
                          "status", job, "-o", "json", "--server", endpoint],
                         capture_output=True, text=True, timeout=30)
    return json.loads(got.stdout) if got.returncode == 0 else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--agents", type=int, default=10)
    ap.add_argument("--seconds", type=float, default=180,
                    help="how long the formed job runs (default 180)")
    ap.add_argument("--lease", default="3s")
    ap.add_argument("--keepalive", default="500ms")
    ap.add_argument("--build", default=os.environ.get(
        "RDZV_BUILD_ROOT", os.path.join(SOURCE, "build")))
    ap.add_argument("--keep", action="store_true",
                    help="keep the logs' folder and say where")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="fence-soak-")
    agent = os.path.join(args.build, "client", "agent", "rdzv-agent")
    daemon, endpoint, dlines = start_rdzvd(args.build, tmp, args.keepalive)
    job = "fence-soak"
    procs, logs = [], []
    rc = 0
    try:
        for i in range(args.agents):
            log = open(os.path.join(tmp, "agent-%d.log" % i), "w")
            logs.append(log)
            procs.append(subprocess.Popen(
                [agent, "join", "--server", endpoint, "--id", job,
                 "--nnodes", str(args.agents), "--nproc-per-node", "1",
                 "--node-rank", str(i), "--lease-ttl", args.lease,
                 "--max-restarts", "0", "--last-call", "1s",
                 "--stop-timeout", "2s", "--log-dir",
                 os.path.join(tmp, "logs-%d" % i), "--", "/bin/sleep",
                 "100000"], stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True))
        deadline = time.monotonic() + 60
        st = None
        while time.monotonic() < deadline:
            st = status(args.build, endpoint, job)
            if st is not None and st.get("state") == "running":
                break
            time.sleep(0.2)
        else:
            print("fence_soak: the job of %d agents did not form in 60 s: "
                  "%s" % (args.agents, st), file=sys.stderr)
            return 2
        gen0 = st["generation"]
        t0 = time.monotonic()
        while time.monotonic() - t0 < args.seconds:
            time.sleep(1)
            if any(p.poll() is not None for p in procs):
                break
        ran = time.monotonic() - t0
        st = status(args.build, endpoint, job) or {}
        for log in logs:
            log.flush()
        fenced, lost = 0, 0
        for i in range(args.agents):
            with open(os.path.join(tmp, "agent-%d.log" % i)) as f:
                text = f.read()
            n = text.count("(fencing)")
            if n:
                print("agent %d fenced %d times:\n%s" % (i, n, "\n".join(
                    l for l in text.splitlines() if "fencing" in l)))
            fenced += n
        lost = sum(1 for l in dlines if "lease ended" in l)
        exited = [i for i, p in enumerate(procs) if p.poll() is not None]
        print("fence soak: %d agents x %.1f min = %.1f agent-minutes at "
              "lease %s, keepalive %s: %d fencing, %d leases ended, "
              "generation %s -> %s, restarts %s, agents exited early %s; "
              "load %s" % (args.agents, ran / 60, args.agents * ran / 60,
                           args.lease, args.keepalive, fenced, lost, gen0,
                           st.get("generation"), st.get("restart_count"),
                           exited, " ".join("%.2f" % x
                                            for x in os.getloadavg())))
        if fenced or lost or exited or st.get("generation") != gen0:
            rc = 1
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
        daemon.terminate()
        daemon.wait(30)
        for log in logs:
            log.close()
        if args.keep:
            print("kept %s" % tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
