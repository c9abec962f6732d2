"""The status page's hosts (docs/HEALTH.md) in headless Chromium: the
counts by state and every host that is not ok, from /hosts, with a host
name and reason full of markup shown as text; /hosts itself as JSON."""

import http.client
import json

import pytest

import rdzvnode
import rdzvtest as rt
from test_status_page import CHROMIUM, TEXT, browser, open_tab  # noqa: F401

pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="Debian's chromium is not installed "
    "(deploy/install-deps.sh test installs it)")

PB = rdzvnode.pb
EVIL = "<img src=x onerror=window.pwned=1>"


def get(port, path):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        c.request("GET", path)
        r = c.getresponse()
        return r.status, r.getheader("Content-Type"), r.read().decode()
    finally:
        c.close()


def test_page_lists_hosts(tmp_path, browser):  # noqa: F811
    d = rt.Daemon(tmp_path, ["--http-listen", "127.0.0.1:0",
                             "--admin", "anonymous"])
    port = int(d.wait_line(r"serving HTTP on 127\.0\.0\.1:(\d+):").group(1))
    page = None
    try:
        # No host yet: an empty list, and no hosts section on the page.
        st, ctype, body = get(port, "/hosts")
        assert st == 200 and ctype == "application/json", (st, ctype)
        doc = json.loads(body)
        assert doc["counts"] == {"ok": 0, "suspect": 0, "quarantined": 0}
        assert doc["hosts"] == []

        with rdzvnode.Control(d.addr) as c:
            c.set_host("gpu-b07", PB.types.HOST_STATE_QUARANTINED,
                       "ECC errors")
            c.set_host(EVIL, PB.types.HOST_STATE_QUARANTINED,
                       "reason <b>" + EVIL)
            c.set_host("gpu-a01", PB.types.HOST_STATE_QUARANTINED, "x")
            c.set_host("gpu-a01", PB.types.HOST_STATE_OK, "fixed")
        doc = json.loads(get(port, "/hosts")[2])
        assert doc["counts"] == {"ok": 1, "suspect": 0, "quarantined": 2}
        assert [h["name"] for h in doc["hosts"]] == [EVIL, "gpu-b07"]
        assert doc["hosts"][1]["reason"] == "quarantined by anonymous: ECC errors"
        # The same rdzv.v1.Host as Control.ListHosts, under the proto's
        # field names.
        assert doc["hosts"][1]["state"] == "quarantined", doc
        assert 0 < doc["hosts"][1]["since_unix_ms"] <= doc["now_unix_ms"], doc

        page = open_tab(browser, "http://127.0.0.1:%d/" % port)
        rt.wait_for(lambda: "Hosts: 1 ok, 0 suspect, 2 quarantined" in
                    (page.eval(TEXT) or ""), 30, interval=0.1,
                    what="the hosts on the page")
        names = page.eval("Array.from(document.querySelectorAll("
                          "'td.host-name')).map(e => e.textContent).join('|')")
        assert names == EVIL + "|gpu-b07", names
        assert "quarantined by anonymous: ECC errors" in page.eval(TEXT)
        assert page.eval("document.querySelectorAll('#hosts img, #hosts b')"
                         ".length") == 0
        assert page.eval("window.pwned === undefined") is True
    finally:
        if page is not None:
            page.close()
        assert d.stop() == 0, d.output()[-3000:]
