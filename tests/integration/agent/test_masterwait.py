"""librdzv-masterwait.so (client/agent/masterwait.c, docs/RECOVERY.md):
preloaded into a process that is not rank 0, its first connect() to
MASTER_PORT waits until the port answers, bounded; anything else goes
straight through. And rdzv-agent preloads it into plain init_process_group
workers, which then form their process group."""

import os
import socket
import subprocess
import sys
import textwrap
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                ".."))
import rdzvagent  # noqa: E402
import rdzvtest as rt  # noqa: E402

SHIM = os.path.join(rt.BUILD_ROOT, "client", "agent",
                    "librdzv-masterwait.so")
AGENT = os.path.join(rt.BUILD_ROOT, "client", "agent", "rdzv-agent")

# Says "connecting", connects once to 127.0.0.1:PORT and prints "ok
# SECONDS" or "ERRNO SECONDS".
CLIENT = textwrap.dedent("""
    import socket, sys, time
    s = socket.socket()
    print("connecting", flush=True)
    t0 = time.monotonic()
    try:
        s.connect(("127.0.0.1", int(sys.argv[1])))
        print("ok %.3f" % (time.monotonic() - t0))
    except OSError as e:
        print("%s %.3f" % (e.errno, time.monotonic() - t0))
""")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def client(port, master_port, rank="1", wait_ms=None):
    env = dict(os.environ, LD_PRELOAD=SHIM, MASTER_PORT=str(master_port),
               RANK=rank)
    if wait_ms is not None:
        env["RDZV_MASTER_WAIT_MS"] = str(wait_ms)
    return subprocess.Popen([sys.executable, "-c", CLIENT, str(port)],
                            env=env, stdout=subprocess.PIPE, text=True)


def result(p):
    out, _ = p.communicate(timeout=60)
    first, word, secs = out.split()
    assert first == "connecting", out
    return word, float(secs)


def test_waits_for_the_master():
    """Nothing listens on MASTER_PORT when the client connects: the
    connect returns once the port answers, not refused."""
    port = free_port()
    p = client(port, port)
    assert p.stdout.readline() == "connecting\n"
    time.sleep(0.3)
    with socket.socket() as srv:
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        srv.bind(("127.0.0.1", port))
        srv.listen(8)
        out, _ = p.communicate(timeout=60)
    word, secs = out.split()
    assert word == "ok", out
    assert float(secs) >= 0.3, out


def test_passes_the_rest_through():
    """Rank 0, another port, and a master that never answers within
    RDZV_MASTER_WAIT_MS: refused (ECONNREFUSED), the last after the
    bound."""
    port = free_port()
    assert result(client(port, port, rank="0"))[0] == "111"
    assert result(client(port, port + 1))[0] == "111"
    word, secs = result(client(port, port, wait_ms=300))
    assert word == "111" and secs >= 0.3, (word, secs)


PLAIN = textwrap.dedent("""
    import os, torch, torch.distributed as dist
    dist.init_process_group("gloo")
    t = torch.ones(1)
    dist.all_reduce(t)
    print("LD_PRELOAD=%s sum=%d" % (os.environ.get("LD_PRELOAD"),
                                    int(t.item())), flush=True)
    dist.destroy_process_group()
""")


def test_agent_preloads_plain_workers(tmp_path):
    """Two agents, plain init_process_group workers with no rdzv import:
    the agent put the shim first in LD_PRELOAD, the group forms."""
    pytest.importorskip("torch")
    script = tmp_path / "plain.py"
    script.write_text(PLAIN)
    d = rt.Daemon(tmp_path)
    try:
        agents = []
        for i in range(2):
            agents.append(subprocess.Popen(
                [AGENT, "join", "--server", d.addr, "--id", "masterwait",
                 "--nnodes", "2", "--nproc-per-node", "1", "--node-rank",
                 str(i), "--last-call", "1s", "--tee", "--log-dir",
                 str(tmp_path / ("logs-%d" % i))] + rdzvagent.preload_args() +
                ["--", sys.executable,
                 str(script)], stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT, text=True,
                env=dict(os.environ, LD_PRELOAD="")))
        outs = [a.communicate(timeout=120)[0] for a in agents]
    finally:
        d.stop()
    assert [a.returncode for a in agents] == [0, 0], outs
    for out in outs:
        assert "LD_PRELOAD=%s sum=2" % SHIM in out, out
        rdzvagent.check_preloaded(out)
