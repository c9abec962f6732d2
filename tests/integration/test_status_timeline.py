"""The job's timeline on the status page (docs/OPERATIONS.md, "The
timeline") in headless Chromium driven by Selenium (Debian's
python3-selenium and chromium-driver): a job whose node fails, which
restarts, then loses a node whose place a spare takes, shows its three
generations as bands in order, one lane per node in node order with the
states each went through, and the reasons as hover text; a node's
training steps show on its lane. A 1,000-node job's page groups its lanes
and the test prints how long the page took to show it.

/api/events, the history the timeline is drawn from, is checked over plain
HTTP: every event, in pages, and clear refusals.

With RDZV_TIMELINE_SCREENSHOT=PATH the story's timeline is also written
there as a PNG (how docs/status-timeline.png is made): the story is then
spread over a few seconds so that the picture reads."""

import json
import os
import shutil
import tempfile
import time
import urllib.error
import urllib.request

import pytest

import rdzvtest as rt
from rdzvnode import Control, Node, channel

CHROMIUM = shutil.which("chromium")
DRIVER = shutil.which("chromedriver")
try:
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service
except ImportError:
    webdriver = None

needs_browser = pytest.mark.skipif(
    CHROMIUM is None or DRIVER is None or webdriver is None,
    reason="Debian's chromium, chromium-driver and python3-selenium are not "
           "all installed (deploy/install-deps.sh test installs them)")

REASON = "CUDA error: an illegal memory access <script>window.pwned=1</script>"
SPARE = "spare<img src=x onerror=window.pwned=2>"


@pytest.fixture
def browser():
    profile = tempfile.mkdtemp(prefix="rdzv-chromium-")
    opts = Options()
    opts.binary_location = CHROMIUM
    for a in ("--headless", "--no-sandbox", "--disable-gpu",
              "--disable-dev-shm-usage", "--no-first-run",
              "--user-data-dir=" + profile, "--window-size=1200,900"):
        opts.add_argument(a)
    drv = webdriver.Chrome(service=Service(DRIVER), options=opts)
    try:
        yield drv
    finally:
        drv.quit()
        shutil.rmtree(profile, ignore_errors=True)


def daemon(tmp_path, args=()):
    d = rt.Daemon(tmp_path, ["--http-listen", "127.0.0.1:0"] + list(args))
    http = int(d.wait_line(r"serving HTTP on 127\.0\.0\.1:(\d+):").group(1))
    return d, "http://127.0.0.1:%d/" % http


def get_json(url):
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)


BANDS = ("Array.from(document.querySelectorAll('svg.timeline g.band'))"
         ".map(g => [+g.dataset.generation, +g.dataset.world,"
         " +g.dataset.restart, +g.querySelector('rect').getAttribute('x')])")
LANES = ("Array.from(document.querySelectorAll('svg.timeline g.lane'))"
         ".map(g => [g.dataset.node, g.dataset.states,"
         " g.querySelector('text').firstChild.nodeValue])")


def titles(drv, sel):
    return drv.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0]))"
        ".map(e => e.querySelector(':scope > title').textContent)", sel)


@needs_browser
def test_timeline_tells_a_jobs_story(tmp_path, browser):
    d, base = daemon(tmp_path)
    drv = browser
    nodes = [Node(d.addr, name=h) for h in ("host-a", "host-b", "host-c")]
    try:
        a, b, c = nodes
        for i, n in enumerate((a, b)):
            n.join("story", min_nodes=2, max_nodes=2, max_restarts=3,
                   reconnect_grace_ms=300, lease_ttl_ms=5000, rank_hint=i)
        g1 = a.wait_assignment().generation
        c.join("story", min_nodes=2, max_nodes=2, max_restarts=3,
               reconnect_grace_ms=300, lease_ttl_ms=5000, hostname=SPARE)
        c.wait_event("waiting")

        drv.get(base + "#job=story")
        rt.wait_for(lambda: len(drv.execute_script("return " + BANDS)) == 1,
                    30, interval=0.1,
                    what="the first generation's band")
        drv.execute_script("window.stillHere = 1")
        # The picture spreads the story out; the test itself does not wait.
        shot = os.environ.get("RDZV_TIMELINE_SCREENSHOT")
        pace = 1.5 if shot else 0
        time.sleep(pace)

        # A worker fails: the job restarts with the same two nodes.
        b.report(g1, "FAILED", exits=[(0, 1, 0)], message=REASON)
        g2 = a.wait_assignment(after=g1).generation
        b.wait_assignment(after=g1)
        a.progress(g2, 5)
        b.progress(g2, 5)
        time.sleep(pace)
        # host-a is lost; the spare takes its place.
        a.close()
        g3 = c.wait_assignment(after=g2, timeout=15).generation
        b.wait_assignment(after=g2)
        time.sleep(pace)
        b.progress(g3, 42)
        c.progress(g3, 40)

        rt.wait_for(lambda: len(drv.execute_script("return " + BANDS)) == 3
                    and
                    "step 40" in drv.execute_script(
                        "return document.querySelector('svg.timeline')"
                        ".textContent"), 30, interval=0.1,
                    what="three generations and the spare's step, live")
        assert drv.execute_script("return window.stillHere") == 1
        bands = drv.execute_script("return " + BANDS)
        # Generations left to right, each of world size 2; the failure
        # counts as a restart, the spare's taking over as the job says.
        counted = Control(d.addr).get_job("story").restart_count
        assert [x[:3] for x in bands] == [[g1, 2, 0], [g2, 2, 1],
                                          [g3, 2, counted]], bands
        assert bands[0][3] < bands[1][3] < bands[2][3], bands

        lanes = drv.execute_script("return " + LANES)
        assert [x[0] for x in lanes] == [str(n.node_id) for n in nodes]
        sa, sb, sc = (x[1].split() for x in lanes)
        assert sa[:2] == ["joined", "running"] and sa[-1] == "lost", sa
        assert sa.count("running") == 2, sa          # generations 1 and 2
        assert sb[:2] == ["joined", "running"] and sb[-1] == "running", sb
        assert sb.count("running") == 3, sb
        assert sc == ["spare", "running"], sc
        # The host names are text: the spare's markup ran nothing.
        assert lanes[2][2] == SPARE[:27] + "…", lanes[2][2]
        assert drv.execute_script(
            "return document.querySelectorAll('main img, main script')"
            ".length") == 0
        assert drv.execute_script("return window.pwned") is None

        # Hover text: each restart says what caused it, each mark its event.
        restarts = titles(drv, "svg.timeline g.mark[data-kind=restart]")
        assert len(restarts) == 2, restarts
        assert REASON in restarts[0] and "host-b" in restarts[0], restarts
        assert "host-a (node %d) was lost" % a.node_id in restarts[1], restarts
        fails = titles(drv, "g.lane[data-node='%d'] g.mark[data-kind=failure]"
                       % b.node_id)
        assert len(fails) == 1 and REASON in fails[0], fails
        lost = titles(drv, "g.lane[data-node='%d'] g.mark[data-kind=lost]"
                      % a.node_id)
        assert len(lost) == 1 and "was lost" in lost[0], lost
        # Its steps as the page saw them, the latest last.
        steps = drv.execute_script(
            "return Array.from(document.querySelectorAll(\"g.lane[data-node="
            "'%d'] line.step\")).map(e => e.dataset.step)" % b.node_id)
        assert steps[-1] == "42", steps

        if shot:
            box = drv.find_element("css selector", "div.timeline-box")
            drv.execute_script("arguments[0].scrollIntoView()", box)
            with open(shot, "wb") as f:
                f.write(box.screenshot_as_png)

        # The whole history over HTTP, in pages.
        st, first = get_json(base + "api/events?job=story&limit=3")
        assert st == 200 and first["more"] is True
        assert [e["seq"] for e in first["events"]] == [1, 2, 3]
        assert first["events"][0]["kind"] == "created"
        st, rest = get_json(base + "api/events?job=story&after=3")
        assert st == 200 and rest["more"] is False
        kinds = [e["kind"] for e in rest["events"]]
        assert kinds.count("round") == 3 and "failure" in kinds, kinds
        assert any(REASON in e["message"] for e in rest["events"])
        for n in nodes:
            n.close()
        assert d.stop() == 0, d.output()[-3000:]
    finally:
        for n in nodes:
            n.close()
        d.stop()


def test_api_events_refusals(tmp_path):
    """Bad queries are refused with a reason; the daemon serves on."""
    d, base = daemon(tmp_path)
    try:
        for q, code, words in (
                ("", 400, "needs job=ID"),
                ("?job=", 400, "/api/events:"),
                ("?job=no-such", 404, "job no-such not found"),
                ("?job=x&limit=0", 400, "limit=N is 1 to 10000"),
                ("?job=x&limit=10001", 400, "limit=N is 1 to 10000"),
                ("?job=x&after=-1", 400, "after=SEQ is a number")):
            st, doc = get_json(base + "api/events" + q)
            assert st == code and words in doc["error"], (q, st, doc)
        with Node(d.addr, name="n") as n:
            n.join("x", min_nodes=1, max_nodes=1)
            n.wait_assignment()
            st, doc = get_json(base + "api/events?job=x")
            assert st == 200 and [e["kind"] for e in doc["events"]] == [
                "created", "join", "round"], doc
        # A clean exit: under ASan, nothing these answers made leaked.
        assert d.stop() == 0, d.output()[-3000:]
    finally:
        d.stop()


@needs_browser
def test_timeline_of_1000_nodes(tmp_path, browser, capsys):
    """A 1,000-node job: 40 lanes of 25 nodes each, one band, and the time
    from opening the page to the drawn timeline printed (a figure, with a
    10 s bound only as a sanity check)."""
    d, base = daemon(tmp_path, ["--max-streams", "1100"])
    ch = channel(d.addr)
    nodes = []
    try:
        for i in range(1000):
            n = Node(d.addr, name="gpu-%04d" % i)
            n.channel = ch
            nodes.append(n)
            n.join("big", min_nodes=1000, max_nodes=1000, nproc=8,
                   last_call_ms=100, wait=False)
        for n in nodes:
            n.wait_accepted(timeout=60)
        g = nodes[0].wait_assignment(timeout=60).generation

        drv = browser
        drv.get(base + "#job=big")
        rt.wait_for(lambda: drv.execute_script(
            "var b = document.querySelector('div.timeline-box');"
            "return b !== null && b.dataset.ready === '1'"), 30,
            interval=0.05, what="the 1,000-node job's timeline")
        ready, drawn = drv.execute_script(
            "var b = document.querySelector('div.timeline-box');"
            "return [+b.dataset.readyMs, +b.dataset.drawMs]")
        parts = drv.execute_script(
            "var n = performance.getEntriesByType('navigation')[0];"
            "var h = performance.getEntriesByType('resource').filter("
            "e => e.name.indexOf('api/events') >= 0)[0];"
            "return [n.responseEnd, n.domContentLoadedEventEnd,"
            " h ? h.startTime : -1, h ? h.responseEnd : -1]")
        with capsys.disabled():     # the figure, in meson's log too
            print("\n1000-node timeline: page shown in %d ms from "
                  "navigation, one draw %.1f ms (page loaded at %d ms, its "
                  "scripts ran by "
                  "%d ms, the history read from %d to %d ms)"
                  % ((ready, drawn) + tuple(parts)))
        svg = drv.execute_script(
            "var s = document.querySelector('svg.timeline');"
            "return [s.dataset.nodes, s.dataset.lanes, s.dataset.grouped]")
        assert svg == ["1000", "40", "1"], svg
        lanes = drv.execute_script("return " + LANES)
        first = min(n.node_id for n in nodes)
        assert lanes[0][2] == "nodes %d–%d (25)" % (first, first + 24), lanes[0]
        assert all(x[1].split()[-1] == "running" for x in lanes), lanes
        bands = drv.execute_script("return " + BANDS)
        assert [x[:3] for x in bands] == [[g, 8000, 0]], bands
        assert ready < 10000, "the page took %d ms" % ready
    finally:
        ch.close()
        for n in nodes:
            n.channel = None
            n.close()
        d.stop()


@needs_browser
def test_timeline_evictions(tmp_path, browser):
    """An operator's eviction and a host's quarantine end two lanes, each
    in its own state, with the reason on hover."""
    d, base = daemon(tmp_path, ["--admin", "anonymous"])
    nodes = [Node(d.addr, name=h) for h in ("good-1", "gone-1", "bad-1")]
    ctl = Control(d.addr)
    try:
        for n in nodes:
            n.join("hosts", min_nodes=1, max_nodes=3, last_call_ms=200,
                   wait=False)
        for n in nodes:
            n.wait_accepted()
        # The first round may be smaller; the three are in one soon after.
        rt.wait_for(lambda: ctl.get_job("hosts").world_size == 3, 30,
                    what="a round of the three")
        g = ctl.get_job("hosts").generation
        drv = browser
        drv.get(base + "#job=hosts")
        rt.wait_for(lambda: len(drv.execute_script("return " + BANDS)) == g,
                    30, interval=0.1, what="the generations' bands")
        ctl.evict_node("hosts", nodes[1].node_id, "disk full")
        ctl.set_host("bad-1", 3, "ECC errors")       # HOST_STATE_QUARANTINED
        rt.wait_for(lambda: len(drv.execute_script("return " + BANDS)) ==
                    g + 2, 30, interval=0.1,
                    what="the rounds after the evictions")
        lanes = {int(x[0]): x[1].split()[-1]
                 for x in drv.execute_script("return " + LANES)}
        assert [lanes[n.node_id] for n in nodes] == [
            "running", "evicted", "quarantined"], lanes
        gone = titles(drv, "g.lane[data-node='%d'] g.mark[data-kind=evicted]"
                      % nodes[1].node_id)
        assert len(gone) == 1 and "disk full" in gone[0], gone
        bad = titles(drv, "g.lane[data-node='%d'] g.mark[data-kind=evicted]"
                     % nodes[2].node_id)
        assert len(bad) == 1 and "ECC errors" in bad[0], bad
        # Neither is a failure: the bands after them are changes of nodes.
        assert [x[:2] for x in drv.execute_script("return " + BANDS)][-3:] \
            == [[g, 3], [g + 1, 2], [g + 2, 1]]
        restarts = titles(drv, "svg.timeline g.mark[data-kind=restart]")
        assert "disk full" in restarts[-2] and "ECC errors" in restarts[-1], \
            restarts
    finally:
        ctl.close()
        for n in nodes:
            n.close()
        d.stop()
