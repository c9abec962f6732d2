"""What the Python benches share: a free port, and a private rdzvd on a
temporary database, started and stopped by the bench itself."""

import os
import re
import socket
import subprocess
import threading
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_rdzvd(build, tmp, new_session=False):
    """rdzvd on 127.0.0.1:0 with its database under |tmp|; (process,
    address) once it listens. |new_session|: in a process session of its
    own, so that a bench killing process groups never reaches it."""
    p = subprocess.Popen([os.path.join(build, "daemon", "rdzvd"), "--db",
                          os.path.join(tmp, "rdzv.db"), "--listen",
                          "127.0.0.1:0", "--http-listen", "none"],
                         stderr=subprocess.PIPE, text=True,
                         start_new_session=new_session)
    deadline = time.monotonic() + 30
    for line in p.stderr:
        m = re.search(r"listening on (\S+)", line)
        if m:
            # Keep reading, so that rdzvd never blocks on a full pipe.
            threading.Thread(target=lambda: [None for _ in p.stderr],
                             daemon=True).start()
            return p, m.group(1)
        if time.monotonic() > deadline:
            break
    p.kill()
    raise RuntimeError("rdzvd did not start")
