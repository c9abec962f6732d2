"""One client that creates and closes jobs in a loop (issue 21): rdzvd
keeps at most max-ended-jobs-per-identity of its ended jobs, the oldest
pruned first and counted in /metrics, and `rdzvctl status --all` lists
every job kept page after page (ListJobs is paged), however small
--max-message is, where one message could not hold them all; --limit
stops early."""

import json
import re
import time
import urllib.request

import grpc

import rdzvtest as rt
import ctlharness as h
from rdzvnode import Control, Node, rpc_code, pb

JOBS = 200          # created and closed, one after another
KEPT = 80           # max-ended-jobs-per-identity


def metric(http, name):
    with urllib.request.urlopen("http://%s/metrics" % http, timeout=10) as r:
        text = r.read().decode()
    m = re.search(r"^%s (\d+)$" % re.escape(name), text, re.M)
    assert m, text
    return int(m.group(1))


def test_ended_jobs_bounded_and_listed_in_pages(tmp_path):
    with rt.Daemon(tmp_path, ["--max-ended-jobs-per-identity", str(KEPT),
                              "--max-message", "16K",
                              "--http-listen", "127.0.0.1:0"]) as d:
        http = "127.0.0.1:%s" % d.wait_line(
            r"serving HTTP on 127\.0\.0\.1:(\d+):").group(1)
        t0 = time.monotonic()
        for i in range(JOBS):
            with Node(d.addr, name="n%d" % i) as n:
                n.join("loop-%03d" % i, min_nodes=1, max_nodes=1)
                gen = n.wait_assignment().generation
                n.report(gen, "SUCCEEDED")
        print("%d jobs created and closed in %.1f s" % (JOBS, time.monotonic() - t0))
        with Control(d.addr) as c:
            rt.wait_for(lambda: len(c.list_jobs(all=True)) == KEPT, 10,
                        what="%d ended jobs kept" % KEPT)
            # Pages of 9: every kept job once, in creation order.
            jobs = c.list_jobs(all=True, page_size=9)
            assert [j.rdzv_id for j in jobs] == \
                ["loop-%03d" % i for i in range(JOBS - KEPT, JOBS)]
            assert all(j.state == pb.types.JOB_STATE_CLOSED for j in jobs)
            # One page would not fit in 16 KiB: rdzvd cut it short.
            r = c._unary("ListJobs", pb.control.ListJobsRequest(all=True),
                         pb.control.ListJobsResponse, 10)
            assert 0 < len(r.jobs) < KEPT and r.next_page_token, len(r.jobs)
            code, details, _ = rpc_code(
                c._unary, "ListJobs", pb.control.ListJobsRequest(
                    all=True, page_token="no-such-token"),
                pb.control.ListJobsResponse, 10)
            assert code == grpc.StatusCode.INVALID_ARGUMENT, (code, details)
            assert "page_token" in details
        assert metric(http, "rdzvd_ended_jobs_pruned_total") == JOBS - KEPT

        cp = h.check(h.ctl(d.addr, "status", "--all", "-o", "json", fixed=False))
        ids = [j["id"] for j in json.loads(cp.stdout)["jobs"]]
        assert ids == ["loop-%03d" % i for i in range(JOBS - KEPT, JOBS)], ids
        cp = h.check(h.ctl(d.addr, "status", "--all", fixed=False))
        assert len(re.findall(r"^loop-\d{3} ", cp.stdout, re.M)) == KEPT, cp.stdout
        cp = h.check(h.ctl(d.addr, "status", "--all", "--limit", "7", fixed=False))
        assert re.findall(r"^loop-\d{3}", cp.stdout, re.M) == \
            ["loop-%03d" % i for i in range(JOBS - KEPT, JOBS - KEPT + 7)], cp.stdout
        assert "the first 7 jobs shown (--limit)" in cp.stderr, cp.stderr
        cp = h.ctl(d.addr, "status", "--limit", "0", fixed=False)
        assert cp.returncode == 2 and "--limit 0" in cp.stderr, cp.stderr
