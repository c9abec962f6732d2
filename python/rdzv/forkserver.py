"""rdzv-agent's preloaded fork server (`rdzv-agent join --preload MODULES`,
docs/AGENT.md "Warm starts").

The agent starts this once, as soon as it starts, with the worker command's
own python (`python3 -c <this file> ...`): it imports the named modules
while the agent waits for the rendezvous, says "ready" on its socket (fd 3,
SOCK_SEQPACKET), and then, for each worker the agent asks for, forks a
process that becomes that worker as `python3 script args` or
`python3 -m module args` would, without a new interpreter or a new
`import torch`.

Each worker is forked twice: the server forks a helper, the helper forks
the worker and exits. The agent is a child subreaper (PR_SET_CHILD_SUBREAPER),
so the worker is reparented to the agent, which then waits for it, signals
its group, reads its /proc and gets its exit status as for a worker it
forked itself (client/agent/forksrv.c says why this way). The server never
initialises CUDA (torch does not at import) and never starts a thread, so
forking it is safe.

A request is one JSON message with five descriptors (SCM_RIGHTS): stdin,
stdout, stderr, the agent's exec pipe (client/agent/workers.c) and a pipe
on which the agent says "go" once it has the worker's pid. The worker
closes the exec pipe once it is about to run the script, as exec would;
a GPU check's result (SPEC §7) is written on it first, by `rdzv-agent
gpucheck-worker` run from the worker process before the script, as between
fork and exec. The answer is {"pid": N} or {"error": "..."}.
"""

import ctypes
import errno
import json
import os
import signal
import socket
import struct
import sys
import time

PR_SET_PDEATHSIG = 1
GPUCHECK_EXIT = 125     # client/agent/gpucheck_run.h
# The interpreter's own flags a worker command may carry; others go the
# ordinary way (exec).
FLAGS = {"-u"}


def parse_command(argv):
    """(flags, kind, target, args) of a `python [-u] script|-m mod args`
    command, or a ValueError naming what the fork server cannot run."""
    i, flags = 1, set()
    while i < len(argv) and argv[i] in FLAGS:
        flags.add(argv[i])
        i += 1
    if i >= len(argv):
        raise ValueError("no script after %s" % " ".join(argv[:i]))
    if argv[i] == "-m":
        if i + 1 >= len(argv):
            raise ValueError("no module after -m")
        return flags, "module", argv[i + 1], argv[i + 2:]
    if argv[i].startswith("-"):
        raise ValueError("python option %s: only -u and -m are run "
                         "preloaded" % argv[i])
    return flags, "script", argv[i], argv[i + 1:]


def libc():
    return ctypes.CDLL(None, use_errno=True)


def set_cmdline(argv):
    """/proc/self/cmdline (ps, pgrep -f) as the worker's own command: the
    server's long `-c` argument leaves room to write it over."""
    try:
        with open("/proc/self/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        # Fields 48 and 49 of proc(5), counted from after the name.
        start, end = int(fields[45]), int(fields[46])
    except (OSError, ValueError, IndexError):
        return
    text = b"\0".join(a.encode(errors="surrogateescape") for a in argv) + b"\0"
    size = end - start
    if size <= 0 or len(text) > size:
        return
    ctypes.memmove(start, text + b"\0" * (size - len(text)), size)


def make_stdio(fd, mode, unbuffered):
    """A sys.std* for |fd| as the interpreter makes one at start."""
    import io
    write = mode == "w"
    raw = io.FileIO(fd, "wb" if write else "rb", closefd=False)
    tty = raw.isatty()
    buf = raw if unbuffered and write else (
        io.BufferedWriter(raw) if write else io.BufferedReader(raw))
    return io.TextIOWrapper(
        buf, encoding=os.environ.get("PYTHONIOENCODING", "").split(":")[0]
        or None, errors="backslashreplace" if fd == 2 else None,
        line_buffering=write and (tty or fd == 2 or unbuffered),
        write_through=unbuffered and write)


class Server:
    def __init__(self, sock, agent_pid, agent_exe, masterwait):
        self.sock = sock
        self.agent_pid = agent_pid
        self.agent_exe = agent_exe
        self.masterwait = masterwait
        # The environment a GPU check runs in: the agent's, as between
        # fork and exec (without the workers' preload: the agent may be
        # built with a sanitizer that must be loaded first).
        self.check_env = dict(os.environ)
        pre = [p for p in self.check_env.get("LD_PRELOAD", "").split(":")
               if p and p != masterwait]
        if pre:
            self.check_env["LD_PRELOAD"] = ":".join(pre)
        else:
            self.check_env.pop("LD_PRELOAD", None)
        # What libgomp and MKL read when torch loaded them: a worker whose
        # own value differs is told through torch (worker()).
        self.threads_env = os.environ.get("OMP_NUM_THREADS")

    def send(self, **msg):
        self.sock.send(json.dumps(msg).encode())

    def serve(self):
        """Answers requests until the agent closes the socket. Returns the
        request in the worker process, None in the server at the end."""
        while True:
            try:
                data, fds, _, _ = socket.recv_fds(self.sock, 1 << 20, 8)
            except InterruptedError:
                continue
            if not data:
                return None
            try:
                req = json.loads(data)
                if len(fds) != 5:
                    raise ValueError("%d descriptors, not 5" % len(fds))
                got = self.fork(req, fds)
            except (ValueError, OSError) as e:
                for fd in fds:
                    os.close(fd)
                self.send(error=str(e))
                continue
            if got is not None:
                return got
            for fd in fds:
                os.close(fd)

    def fork(self, req, fds):
        """Forks the helper that forks the worker; None here, the request
        in the worker."""
        r, w = os.pipe()
        helper = os.fork()
        if helper == 0:
            os.close(r)
            try:
                pid = os.fork()
            except OSError as e:
                os.write(w, struct.pack("i", -e.errno))
                os._exit(1)
            if pid == 0:
                os.close(w)
                return req, fds
            # Both sides set the group, so signals reach it whoever runs
            # first; the agent gets the pid once the group is set.
            try:
                os.setpgid(pid, pid)
            except OSError:
                pass
            os.write(w, struct.pack("i", pid))
            os._exit(0)
        os.close(w)
        try:
            got = os.read(r, 4)
        finally:
            os.close(r)
            os.waitpid(helper, 0)
        pid = struct.unpack("i", got)[0] if len(got) == 4 else -errno.EIO
        if pid < 0:
            raise OSError(-pid, "fork: %s" % os.strerror(-pid))
        self.send(pid=pid)
        return None


def adopt(agent_pid, go):
    """In the worker: once the helper is gone and the agent (a subreaper)
    is our parent, die with it, as a worker it forked does; then wait for
    the agent's word that it knows our pid (EOF: it does not, and starts
    this worker another way)."""
    deadline = time.monotonic() + 10
    while os.getppid() != agent_pid:
        if time.monotonic() > deadline:
            os._exit(126)
        time.sleep(0.0002)
    lib = libc()
    if lib.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0 or \
            os.getppid() != agent_pid:
        os._exit(126)
    while True:
        try:
            word = os.read(go, 1)
            break
        except InterruptedError:
            continue
    os.close(go)
    if word != b"g":
        os._exit(126)


def gpucheck(server, req, pipe):
    """SPEC §7 in the worker process, before the script: the check runs in
    a process of its own (this one must never load libcuda: nothing that
    touched CUDA may fork, and the worker's CUDA is its own), which writes
    the result on the exec pipe as the exec path's check does."""
    import subprocess
    check = req.get("check")
    if not check:
        return
    try:
        rc = subprocess.call(
            [server.agent_exe, "gpucheck-worker", "--device",
             str(req["device"]), "--fd", str(pipe), "--bytes",
             str(check.get("bytes", 0))],
            env=server.check_env, pass_fds=(pipe,), stdin=subprocess.DEVNULL)
    except OSError:
        rc = GPUCHECK_EXIT
    if rc != 0 and check.get("policy") != "warn":
        os._exit(GPUCHECK_EXIT)


def worker(server, req, fds):
    """Becomes the worker: its process, signals, descriptors, GPU check,
    environment, directory, stdio and command line; then runs it."""
    stdin, out, err, pipe, go = fds
    server.sock.close()
    os.setpgid(0, 0)
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD,
                signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)   # as python3 starts
    adopt(server.agent_pid, go)
    signal.pthread_sigmask(signal.SIG_SETMASK, [])
    os.dup2(stdin, 0)
    os.dup2(out, 1)
    os.dup2(err, 2)
    os.set_inheritable(pipe, False)
    for fd in (stdin, out, err):
        if fd > 2 and fd != pipe:
            os.close(fd)
    # What the server has open is not the worker's.
    os.closerange(3, pipe)
    os.closerange(pipe + 1, 1 << 20)
    if req.get("device", -1) >= 0:
        gpucheck(server, req, pipe)
    argv = req["argv"]
    flags, kind, target, args = parse_command(argv)
    os.environ.clear()
    for kv in req["env"]:
        k, _, v = kv.partition("=")
        if k:
            os.environ[k] = v
    try:
        os.chdir(req["cwd"])
    except OSError:
        pass
    omp = os.environ.get("OMP_NUM_THREADS")
    torch = sys.modules.get("torch")
    if torch is not None and omp != server.threads_env and omp and \
            omp.isdigit() and int(omp) > 0:
        torch.set_num_threads(int(omp))
    unbuffered = "-u" in flags or bool(os.environ.get("PYTHONUNBUFFERED"))
    sys.stdin = sys.__stdin__ = make_stdio(0, "r", unbuffered)
    sys.stdout = sys.__stdout__ = make_stdio(1, "w", unbuffered)
    sys.stderr = sys.__stderr__ = make_stdio(2, "w", unbuffered)
    set_cmdline(argv)
    sys.orig_argv = list(argv)
    import warnings
    warnings.filters[:] = server.warn_filters
    warnings._filters_mutated()
    return pipe, kind, target, args, argv[0]


def run(pipe, kind, target, args, python):
    """The script or module as __main__, as python3 runs it; the exec pipe
    closes first (the agent reads that as "exec'd")."""
    import runpy
    os.close(pipe)
    if kind == "module":
        sys.argv = ["-m"] + list(args)
        sys.path[0] = os.getcwd()
        runpy._run_module_as_main(target, alter_argv=True)
        return
    path = os.path.abspath(target)
    if not os.path.exists(path):
        sys.stderr.write("%s: can't open file %r: [Errno %d] %s\n" % (
            python, path, errno.ENOENT, os.strerror(errno.ENOENT)))
        sys.stderr.flush()
        os._exit(2)
    sys.argv = [target] + list(args)
    sys.path[0] = os.path.dirname(os.path.realpath(path))
    runpy.run_path(target, run_name="__main__")


def main(argv):
    """argv: MODULES AGENT_PID AGENT_EXE MASTERWAIT COMMAND..."""
    import warnings
    modules, agent_pid, agent_exe, masterwait = argv[:4]
    # Python 3.12 warns at each fork of a process with threads; torch 2.x
    # starts its thread pool's threads at import (seen with 2.11), and
    # forking right after the import, before any parallel work, is what
    # this server is for (docs/AGENT.md, "Warm starts"). The workers get
    # the filters back (worker()).
    saved_filters = warnings.filters[:]
    warnings.filterwarnings("ignore", category=DeprecationWarning,
                            message=".*fork.*")
    sock = socket.socket(fileno=3)
    server = Server(sock, int(agent_pid), agent_exe, masterwait)
    server.warn_filters = saved_filters
    t0 = time.monotonic()
    try:
        parse_command(argv[4:])
        for m in [m for m in modules.split(",") if m]:
            __import__(m)
        for name in ("torch.cuda",):
            mod = sys.modules.get(name)
            if mod is not None and getattr(mod, "is_initialized",
                                           lambda: False)():
                raise RuntimeError("CUDA was initialised by the preload: "
                                   "workers cannot be forked from it")
    except BaseException as e:
        server.send(error="%s: %s" % (type(e).__name__, e))
        return 1
    server.send(ready=True, import_ms=int((time.monotonic() - t0) * 1000))
    got = server.serve()
    if got is None:
        return 0
    job = worker(server, *got)
    # Out of every frame of the server: the script's own tracebacks and
    # exit go as python3's would.
    del server, got
    return job


def uncaught(e):
    """An exception out of the script, told as python3 tells it: through
    sys.excepthook, with the traceback from the script's own frame (not
    this server's nor runpy's), then exit status 1."""
    tb = e.__traceback__
    while tb is not None and (tb.tb_frame.f_code.co_filename == "<string>"
                              or tb.tb_frame.f_code.co_filename.startswith(
                                  "<frozen runpy")):
        tb = tb.tb_next
    # The default hook prints the exception's own traceback: trim that.
    sys.excepthook(type(e), e.with_traceback(tb), tb)
    sys.exit(1)


if __name__ == "__main__":
    _job = main(sys.argv[1:])
    if isinstance(_job, int):
        sys.exit(_job)
    del main
    try:
        run(*_job)
    except (SystemExit, KeyboardInterrupt):
        # As python3: SystemExit's code, and death by SIGINT.
        raise
    except BaseException as _e:
        uncaught(_e)
