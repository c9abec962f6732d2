"""What the programs say about a one-node, one-worker job, swept for
counted nouns in the plural after a count of one ("1 nodes", "all 1
workers", "1 jobs"): every program takes the ending from one helper,
plural() of lib/base/text.c. The same run checks two of rdzvd's own lines: at
start it names the quarantined hosts it loaded, and its stop line on SQLite
counts the bytes its commits wrote (no longer 0).

rdzvd, rdzv-agent and rdzvctl are real, at log level debug, on loopback;
the worker is /bin/true.
"""

import os
import re
import subprocess

import rdzvtest as rt

AGENT = rt.build_path("client", "agent", "rdzv-agent")
CTL = rt.build_path("client", "ctl", "rdzvctl")

NOUNS = ("node", "worker", "restart", "job", "rank", "GPU", "device",
         "crash", "transaction", "generation", "round", "participant",
         "spare", "host", "connection", "event", "process", "attempt",
         "step", "listener", "byte", "straggler", "member", "stream")
SINGULAR_WRONG = re.compile(r"(?<![\d.])1 (?:of (?:min |max )?)?(?:%s)e?s\b"
                            % "|".join(NOUNS), re.I)
ALL_ONE = re.compile(r"\ball 1 \w+s\b", re.I)


def ctl(d, *args):
    return subprocess.run([CTL, "--server", d.addr] + list(args),
                          capture_output=True, text=True, timeout=30)


def sweep(what, text):
    bad = [m.group(0) for m in SINGULAR_WRONG.finditer(text)]
    bad += [m.group(0) for m in ALL_ONE.finditer(text)]
    lines = [l for l in text.splitlines()
             if SINGULAR_WRONG.search(l) or ALL_ONE.search(l)]
    assert not bad, "%s says %s:\n%s" % (what, bad, "\n".join(lines))


def test_one_node_one_worker_job_says_it_in_the_singular(tmp_path):
    args = ["--admin", "anonymous", "--http-listen", "none",
            "--on-quarantine", "/bin/true"]
    d = rt.Daemon(tmp_path, args)
    outs = []
    try:
        r = ctl(d, "host", "quarantine", "ghost", "--reason", "spare parts")
        assert r.returncode == 0, r.stderr
        outs.append(("rdzvctl host quarantine", r.stdout + r.stderr))

        agent = rt.Proc([AGENT, "join", "--id", "one", "--server", d.addr,
                         "--nnodes", "1", "--nproc-per-node", "1",
                         "--host", "solo", "--last-call", "1s",
                         "--log-level", "debug",
                         "--log-dir", str(tmp_path / "logs"), "--",
                         "/bin/true"],
                        env={"TMPDIR": str(tmp_path)})
        assert agent.wait(60) == 0, agent.output()
        outs.append(("rdzv-agent", agent.output()))
        for argv in (["status"], ["status", "one"], ["events", "one"],
                     ["wait", "one"], ["hosts"], ["server"],
                     ["status", "one", "-o", "json"]):
            r = ctl(d, *argv)
            assert r.returncode == 0, (argv, r.stderr)
            outs.append(("rdzvctl " + " ".join(argv), r.stdout + r.stderr))
    finally:
        assert d.stop() == 0, d.output()[-3000:]
    outs.append(("rdzvd", d.output()))

    # A restart names the quarantined host it loaded; its stop line counts
    # SQLite's bytes.
    d = rt.Daemon(tmp_path, args)
    try:
        d.wait_line(r"rdzvd: 1 host quarantined, its joins refused: ghost "
                    r"\(rdzvctl hosts --state quarantined", timeout=10)
        r = ctl(d, "host", "clear", "ghost", "--reason", "parts came")
        assert r.returncode == 0, r.stderr
        outs.append(("rdzvctl host clear", r.stdout + r.stderr))
    finally:
        assert d.stop() == 0, d.output()[-3000:]
    m = d.wait_line(r"rdzvd: store \S+: (\d+) transactions?, (\d+) bytes "
                    r"written", timeout=5)
    assert int(m.group(1)) >= 1 and int(m.group(2)) >= 4096, m.group(0)
    assert int(m.group(2)) % 4096 == 0, m.group(0)
    outs.append(("rdzvd after a restart", d.output()))

    for what, text in outs:
        sweep(what, text)
    # The sweep saw the lines that used to say it in the plural.
    agent_out = outs[1][1]
    assert re.search(r"node rank 0 of 1 node, worker ranks 0 to 0 of 1",
                     agent_out), agent_out
    assert "its worker exited 0" in agent_out, agent_out
    assert re.search(r"started 1 worker\b", agent_out), agent_out
