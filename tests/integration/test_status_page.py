"""The status page in a real browser (headless Chromium, driven through its
DevTools protocol with a minimal WebSocket client written here): a job and
its nodes are shown, a node that joins while the page is open appears
without a reload, and a hostname with markup in it is shown as text. On
two replicas on etcd, a standby's page names the leader, and follows its
replica into leading when the leader is killed. Nodes' training steps show,
a straggler marked.

With RDZV_SCREENSHOT=PATH the page's screenshot is also written there (how
docs/status-page.png is made)."""

import base64
import json
import os
import re
import shutil
import socket
import struct
import tempfile
import urllib.request

import pytest

import etcdtest
import rdzvtest as rt
from rdzvnode import Node

CHROMIUM = shutil.which("chromium")

pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="Debian's chromium is not installed "
                             "(deploy/install-deps.sh test installs it)")

EVIL = "<script>window.pwned=1</script><img src=x onerror=window.pwned=2>"


class WebSocket:
    """Just enough of RFC 6455 for the DevTools protocol: one connection,
    masked text frames out, unfragmented frames in."""

    def __init__(self, url):
        rest = url.split("://", 1)[1]
        hostport, path = rest.split("/", 1)
        host, port = hostport.rsplit(":", 1)
        self.s = socket.create_connection((host, int(port)), timeout=30)
        key = base64.b64encode(os.urandom(16)).decode()
        self.s.sendall(("GET /%s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket"
                        "\r\nConnection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
                        "Sec-WebSocket-Version: 13\r\n\r\n"
                        % (path, hostport, key)).encode())
        self.buf = b""
        while b"\r\n\r\n" not in self.buf:
            chunk = self.s.recv(4096)
            if not chunk:
                raise EOFError("DevTools closed the WebSocket handshake")
            self.buf += chunk
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        assert head.startswith(b"HTTP/1.1 101"), head

    def _read(self, n):
        while len(self.buf) < n:
            chunk = self.s.recv(65536)
            if not chunk:
                raise EOFError("DevTools closed the WebSocket")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def send(self, text):
        data = text.encode()
        n = len(data)
        if n < 126:
            head = struct.pack("!BB", 0x81, 0x80 | n)
        elif n < 65536:
            head = struct.pack("!BBH", 0x81, 0x80 | 126, n)
        else:
            head = struct.pack("!BBQ", 0x81, 0x80 | 127, n)
        mask = os.urandom(4)
        self.s.sendall(head + mask +
                       bytes(b ^ mask[i % 4] for i, b in enumerate(data)))

    def recv(self):
        b0, b1 = self._read(2)
        n = b1 & 0x7f
        if n == 126:
            n = struct.unpack("!H", self._read(2))[0]
        elif n == 127:
            n = struct.unpack("!Q", self._read(8))[0]
        data = self._read(n)
        assert b0 & 0x80, "fragmented frames are not expected from DevTools"
        return data.decode()

    def close(self):
        self.s.close()


class Page:
    """One browser tab, by DevTools protocol commands."""

    def __init__(self, ws_url):
        self.ws = WebSocket(ws_url)
        self.id = 0

    def call(self, method, **params):
        self.id += 1
        self.ws.send(json.dumps({"id": self.id, "method": method,
                                 "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self.id:
                assert "error" not in msg, msg
                return msg["result"]

    def eval(self, expr):
        r = self.call("Runtime.evaluate", expression=expr,
                      returnByValue=True)
        assert "exceptionDetails" not in r, r
        return r["result"].get("value")

    def close(self):
        self.ws.close()


@pytest.fixture
def browser(tmp_path):
    profile = tempfile.mkdtemp(prefix="rdzv-chromium-")
    p = rt.Proc([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                 "--disable-dev-shm-usage", "--no-first-run",
                 "--user-data-dir=" + profile, "--remote-debugging-port=0",
                 "--remote-debugging-address=127.0.0.1",
                 "--window-size=1100,760", "about:blank"])
    try:
        port_file = os.path.join(profile, "DevToolsActivePort")
        rt.wait_for(lambda: os.path.exists(port_file) and
                    open(port_file).read().count("\n") >= 1, 60,
                    interval=0.1, what="Chromium's DevTools port")
        port = int(open(port_file).read().split("\n")[0])
        yield port
    finally:
        p.stop()
        shutil.rmtree(profile, ignore_errors=True)


def open_tab(port, url):
    with urllib.request.urlopen("http://127.0.0.1:%d/json/list" % port,
                                timeout=10) as r:
        tabs = [t for t in json.load(r) if t["type"] == "page"]
    page = Page(tabs[0]["webSocketDebuggerUrl"])
    page.call("Page.enable")
    page.call("Page.navigate", url=url)
    return page


TEXT = "document.body ? document.body.innerText : ''"
HOSTS = "Array.from(document.querySelectorAll('td.node-host'))" \
        ".map(e => e.textContent).sort().join('|')"


def test_status_page(tmp_path, browser):
    d = rt.Daemon(tmp_path, ["--http-listen", "127.0.0.1:0"])
    http = int(d.wait_line(r"serving HTTP on 127\.0\.0\.1:(\d+):").group(1))
    base = "http://127.0.0.1:%d/" % http
    nodes = []
    page = None
    try:
        for i in (1, 2):
            n = Node(d.addr, name="gpu-node-0%d" % i)
            nodes.append(n)
            n.join("train-42", min_nodes=2, max_nodes=4, last_call_ms=300,
                   nproc=8, advertise_addr="10.0.0.%d" % i,
                   gpus=[{"device": g} for g in range(8)])
        nodes[0].wait_assignment()

        page = open_tab(browser, base)
        # The list: the job, running, with 2 of 2:4 nodes.
        rt.wait_for(lambda: "train-42" in (page.eval(TEXT) or ""), 30, interval=0.1,
            what="the job in the list")
        text = page.eval(TEXT)
        assert "running" in text and "2 of 2:4" in text

        # The job's detail, reached by its link.
        page.eval("document.querySelector('a[href=\"#job=train-42\"]')"
                  ".click()")
        rt.wait_for(lambda: page.eval(HOSTS) ==
                    "gpu-node-01|gpu-node-02", 30, interval=0.1,
                    what="the job's nodes")
        text = page.eval(TEXT)
        assert "10.0.0.1" in text and "8/8 healthy" in text
        assert "0–7" in text and "8–15" in text

        shot = os.environ.get("RDZV_SCREENSHOT")
        if shot:
            page.eval("window.scrollTo(0, 0)")
            png = page.call("Page.captureScreenshot", format="png")["data"]
            with open(shot, "wb") as f:
                f.write(base64.b64decode(png))

        # A node joins while the page is open: it appears, no reload.
        page.eval("window.stillHere = 1")
        n = Node(d.addr, name="evil")
        nodes.append(n)
        n.join("train-42", min_nodes=2, max_nodes=4, last_call_ms=300,
               hostname=EVIL, nproc=8, advertise_addr="10.0.0.3")
        want = "|".join(sorted(["gpu-node-01", "gpu-node-02", EVIL]))
        rt.wait_for(lambda: page.eval(HOSTS) == want, 30, interval=0.1,
                    what="the joining node on the open page")
        assert page.eval("window.stillHere") == 1
        # Its hostname is text: no element was made of it, nothing ran.
        assert page.eval("document.querySelectorAll('main script, "
                         "main img').length") == 0
        assert page.eval("window.pwned === undefined") is True
        # The new round is shown too.
        rt.wait_for(lambda: page.eval(
            "document.querySelectorAll('td.s-participant').length") == 3,
            30, interval=0.1, what="the round with three participants")
        assert "world size24" in page.eval(TEXT).replace("\t", "").replace("\n", "")
        for n in nodes:
            n.close()
        # The page stays open while rdzvd stops: a clean exit (under ASan:
        # nothing leaked).
        assert d.stop() == 0, d.output()[-3000:]

    finally:
        if page is not None:
            page.close()
        for n in nodes:
            n.close()
        d.stop()


def test_many_ended_jobs(tmp_path, browser):
    """150 retained ended jobs: the list shows the 100 that ended last,
    says how many it leaves out, and its link asks for up to 1,000."""
    from test_http_limits import retain_ended_jobs
    retain_ended_jobs(tmp_path, 150)
    d = rt.Daemon(tmp_path, ["--http-listen", "127.0.0.1:0"])
    http = int(d.wait_line(r"serving HTTP on 127\.0\.0\.1:(\d+):").group(1))
    page = None
    try:
        page = open_tab(browser, "http://127.0.0.1:%d/" % http)
        rt.wait_for(lambda: "Jobs (100)" in (page.eval(TEXT) or ""), 30,
                    interval=0.1, what="the 100 jobs that ended last")
        assert "Not shown: 0 active and 51 ended jobs" in page.eval(TEXT)
        page.eval("document.querySelector('p.more a').click()")
        rt.wait_for(lambda: "Jobs (151)" in (page.eval(TEXT) or ""), 30,
                    interval=0.1, what="every ended job")
        assert "Not shown" not in page.eval(TEXT)
        assert d.stop() == 0, d.output()[-3000:]
    finally:
        if page is not None:
            page.close()
        d.stop()


def test_page_marks_stragglers(tmp_path, browser):
    """Nodes' training steps (Rendezvous.Progress, docs/HEALTH.md) in the
    job's node table, a straggler marked as one, the hang timeout and the
    preload (issue 45) among the settings."""
    d = rt.Daemon(tmp_path, ["--http-listen", "127.0.0.1:0",
                             "--straggler-steps", "5",
                             "--straggler-seconds", "0"])
    http = int(d.wait_line(r"serving HTTP on 127\.0\.0\.1:(\d+):").group(1))
    nodes = [Node(d.addr, name=h) for h in ("fast-node", "slow-node")]
    page = None
    try:
        for i, n in enumerate(nodes):
            n.join("steps-1", min_nodes=2, max_nodes=2, rank_hint=i,
                   extra=lambda r: (setattr(r, "hang_timeout_ms", 600000),
                                    setattr(r, "preload", "torch,numpy")))
        gen = nodes[0].wait_assignment().generation
        page = open_tab(browser, "http://127.0.0.1:%d/#job=steps-1" % http)
        rt.wait_for(lambda: "hang timeout" in (page.eval(TEXT) or ""), 30,
                    interval=0.1, what="the job's detail")
        assert "600 s" in page.eval(TEXT)
        assert re.search(r"\bpreload\s+torch,numpy\n", page.eval(TEXT)), \
            page.eval(TEXT)
        nodes[0].progress(gen, 40)
        nodes[1].progress(gen, 3)
        cell = ("Array.from(document.querySelectorAll('td.straggler'))"
                ".map(e => e.closest('tr').querySelector('td.node-host')"
                ".textContent + ': ' + e.textContent).join('|')")
        rt.wait_for(lambda: page.eval(cell) != "", 30, interval=0.1,
                    what="a straggler on the page")
        assert re.fullmatch(r"slow-node: 3 straggler \(37 behind, \d+ s\)",
                            page.eval(cell)), page.eval(cell)
        assert "\t40\t" in page.eval(TEXT), page.eval(TEXT)
    finally:
        if page is not None:
            page.close()
        for n in nodes:
            n.close()
        d.stop()


def test_standby_page_names_the_leader(tmp_path, browser):
    """Two replicas on etcd (SPEC §14): a standby's page holds no jobs, says
    it is a standby and names the leader. When the leader is killed, the
    same open page follows its replica into leading and shows the job."""
    etcdtest.skip_unless_etcd()
    with etcdtest.Etcd(tmp_path / "etcd") as e:
        store = "etcd://%s/rdzv-page" % e.endpoints
        args = ["--http-listen", "127.0.0.1:0", "--leader-lease", "2s"]
        reps, page = [], None
        try:
            for port in etcdtest.free_ports(2):
                reps.append(rt.Daemon(tmp_path, args, store=store,
                                      listen="127.0.0.1:%d" % port))
            a, b = reps
            a.wait_line(r"election: leading with")
            b.wait_line(r"election: campaigning as")
            http = int(b.wait_line(r"serving HTTP on 127\.0\.0\.1:(\d+):").group(1))
            with Node(a.addr, name="page-node") as n:
                n.join("page-ha", min_nodes=1, max_nodes=1)
                n.wait_assignment()

                page = open_tab(browser, "http://127.0.0.1:%d/" % http)
                rt.wait_for(lambda: "standby" in (page.eval(TEXT) or ""), 30,
                            interval=0.1, what="the standby's page")
                text = page.eval(TEXT)
                assert "the leader is %s" % a.addr in text, text
                assert "page-ha" not in text, text

                a.kill()
                b.wait_line(r"election: leading with", timeout=15)
                rt.wait_for(lambda: "page-ha" in (page.eval(TEXT) or ""), 30,
                            interval=0.1, what="the job on the new leader's page")
                assert "standby" not in page.eval(TEXT)
        finally:
            if page is not None:
                page.close()
            for r in reps:
                r.kill()
