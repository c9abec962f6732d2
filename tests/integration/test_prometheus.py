"""A real Prometheus scrapes rdzvd while a job runs (SPEC §15): the series
read back through Prometheus' query API show the job running, the rounds
counter moving and a rendezvous time observed. promtool checks the
exposition and the example alert rules, which Prometheus also loads."""

import json
import os
import shutil
import subprocess
import urllib.parse
import urllib.request

import pytest

import rdzvtest as rt
from rdzvnode import Node

PROMETHEUS = shutil.which("prometheus")
PROMTOOL = shutil.which("promtool")
RULES = os.path.join(rt.SOURCE_ROOT, "deploy", "prometheus",
                     "rdzvd-alerts.yml")

pytestmark = pytest.mark.skipif(
    PROMETHEUS is None or PROMTOOL is None,
    reason="Debian's prometheus is not installed "
           "(deploy/install-deps.sh test installs it)")


def query(port, q):
    """The instant vector of |q| as {labels-as-tuple: value}, or None
    while Prometheus is not answering yet."""
    url = "http://127.0.0.1:%d/api/v1/query?query=%s" % (
        port, urllib.parse.quote(q))
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            body = json.load(r)
    except OSError:
        return None
    assert body["status"] == "success", body
    return {tuple(sorted(x["metric"].items())): float(x["value"][1])
            for x in body["data"]["result"]}


def value(port, q):
    """The single value of |q|, or None when it has no sample (yet)."""
    v = query(port, q)
    if not v:
        return None
    assert len(v) == 1, v
    return next(iter(v.values()))


def test_promtool_checks_the_rules():
    r = subprocess.run([PROMTOOL, "check", "rules", RULES],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_prometheus_scrapes_rdzvd(tmp_path):
    d = rt.Daemon(tmp_path, ["--http-listen", "127.0.0.1:0"])
    http = int(d.wait_line(r"serving HTTP on 127\.0\.0\.1:(\d+):").group(1))
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % http) as r:
        text = r.read().decode()
    r = subprocess.run([PROMTOOL, "check", "metrics"], input=text,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr

    conf = tmp_path / "prometheus.yml"
    conf.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        "rule_files:\n  - %s\n"
        "scrape_configs:\n  - job_name: rdzvd\n"
        "    static_configs:\n      - targets: ['127.0.0.1:%d']\n"
        % (RULES, http))
    port = rt.quiet_ports(1)[0]
    prom = rt.Proc([PROMETHEUS, "--config.file", str(conf),
                    "--storage.tsdb.path", str(tmp_path / "data"),
                    "--web.listen-address", "127.0.0.1:%d" % port])
    try:
        # One scrape before the job: the counter starts at 0.
        rt.wait_for(lambda: value(port, 'up{job="rdzvd"}') == 1, 60,
                    interval=0.2, what="Prometheus' first scrape of rdzvd")
        assert value(port, "rdzvd_rounds_total") == 0
        with Node(d.addr, name="a") as a, Node(d.addr, name="b") as b:
            a.join("prom", min_nodes=2, max_nodes=2)
            b.join("prom", min_nodes=2, max_nodes=2)
            a.wait_assignment()
            rt.wait_for(lambda: value(
                port, 'rdzvd_jobs{state="running"}') == 1, 30,
                interval=0.2, what="rdzvd_jobs{state=\"running\"} 1")
            rt.wait_for(lambda: value(
                port, "rdzvd_rendezvous_seconds_count") == 1, 30,
                interval=0.2, what="a rendezvous time sample")
            assert value(port, "rdzvd_rounds_total") == 1
            # The counter moved between samples Prometheus holds.
            assert value(port, "changes(rdzvd_rounds_total[5m])") >= 1
            assert value(port, "rdzvd_agents_connected") == 2
            # The rules loaded (and none is broken).
            assert value(port, 'count(ALERTS{alertname="RdzvdDown"})') \
                is None
        prom.stop()
        assert d.stop() == 0, d.output()[-3000:]
    finally:
        prom.stop()
        d.stop()
    assert "error loading" not in prom.output().lower()
