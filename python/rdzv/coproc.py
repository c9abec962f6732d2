"""`rdzv-agent coproc` as a child process: the node's session on rdzvd.

The C client joins, keeps the lease, follows HA leaders and checks what
rdzvd says; this module starts it, reads its JSON lines on a thread and
hands what they say to the rendezvous handler (rdzv.torchrun), and writes
the handler's commands to its stdin (docs/AGENT.md lists both).
"""

import json
import os
import shutil
import subprocess
import threading
import time

AGENT_ENV = "RDZV_AGENT"


def agent_path():
    """The rdzv-agent to run: $RDZV_AGENT, else the one on $PATH, else the
    usual install locations."""
    p = os.environ.get(AGENT_ENV)
    if p:
        return p
    p = shutil.which("rdzv-agent")
    if p:
        return p
    for p in ("/usr/bin/rdzv-agent", "/usr/local/bin/rdzv-agent"):
        if os.access(p, os.X_OK):
            return p
    raise FileNotFoundError("rdzv-agent not found: install it (Debian package "
                            "rdzv-agent) or set $%s to its path" % AGENT_ENV)


class Coproc:
    """One `rdzv-agent coproc` and what it said so far. Every field below
    is read and written under self.cond."""

    def __init__(self, args, env=None):
        self.argv = [agent_path(), "coproc"] + list(args)
        self.cond = threading.Condition()
        self.node_id = None
        self.joined_at = None       # time.time() of the first "joined"
        self.assigned_at = None     # and of the first assignment
        self.latest = None          # the newest assignment (a dict)
        self.stopped = 0            # the newest generation rdzvd stopped
        self.ended = None           # {"status": N, "message": ...}
        self.close_reply = None
        self.errors = []
        # stdin is ours alone (close_fds): when this process dies, the
        # coprocess sees the end of its stdin and ends the node.
        self.p = subprocess.Popen(self.argv, stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, env=env,
                                  close_fds=True)
        self._thread = threading.Thread(target=self._read, daemon=True,
                                        name="rdzv-coproc")
        self._thread.start()

    def _read(self):
        for raw in self.p.stdout:
            try:
                ev = json.loads(raw)
            except ValueError:
                continue
            with self.cond:
                self._take(ev)
                self.cond.notify_all()
        rc = self.p.wait()
        with self.cond:
            if self.ended is None:
                self.ended = {"status": rc if rc >= 0 else 128 - rc,
                              "message": "rdzv-agent coproc exited with status %d" % rc}
            self.cond.notify_all()

    def _take(self, ev):
        kind = ev.get("event")
        if kind == "joined":
            self.node_id = ev.get("node_id")
            self.joined_at = self.joined_at or time.time()
        elif kind == "assignment":
            self.assigned_at = self.assigned_at or time.time()
            if self.latest is None or ev["generation"] > self.latest["generation"]:
                self.latest = ev
        elif kind == "stop":
            self.stopped = max(self.stopped, ev.get("generation", 0))
        elif kind == "ended":
            self.ended = ev
        elif kind == "closed":
            self.close_reply = ev
        elif kind == "error":
            self.errors.append(ev.get("message", ""))

    def send(self, **cmd):
        """Writes one command; a coprocess that is gone has ended already
        (self.ended says how)."""
        line = (json.dumps(cmd) + "\n").encode()
        try:
            self.p.stdin.write(line)
            self.p.stdin.flush()
        except (BrokenPipeError, ValueError, OSError):
            pass

    def wait(self, pred, timeout=None):
        """pred()'s value once true (called under the lock), or None after
        |timeout| seconds (None: no limit). Waits in short slices so that
        signals reach the main thread."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self.cond:
            while True:
                v = pred()
                if v:
                    return v
                left = 1.0
                if deadline is not None:
                    left = min(left, deadline - time.monotonic())
                    if left <= 0:
                        return None
                self.cond.wait(left)

    def finish(self, timeout):
        """Waits up to |timeout| s for the coprocess to exit, then kills
        it; closes the pipes."""
        try:
            self.p.stdin.close()
        except OSError:
            pass
        try:
            self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
        self._thread.join(5)
