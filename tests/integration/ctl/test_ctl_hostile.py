"""Text a client sent never drives the operator's terminal: a hostname and
a report message full of escapes reach rdzvctl's text output, --watch and
rdzvd's log only as printable escapes; JSON keeps them exact (issue 12,
defect 6)."""

import json
import re

import rdzvtest as rt
import ctlharness as h
from rdzvnode import Node

HOSTILE = "\x1b[31mRED\x1b]0;pwned\x07\nfake\r\u009b2J\u202etxt.exe"
# Any C0 control but the line ends, DEL, a C1 control, a bidi control
# (U+202E shows "exe.txt" backwards) or a line separator.
CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f\u0080-\u009f\u061c\u200e"
                     "\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


def no_control(text, what):
    m = CONTROL.search(text)
    assert m is None, "%s has control character %r at %d:\n%r" % (
        what, m.group(), m.start(), text)
    assert "\nfake" not in text, "%s: a client forged a line:\n%s" % (what, text)


def test_hostile_strings_are_escaped_for_the_terminal(tmp_path):
    with rt.Daemon(tmp_path) as d, Node(d.addr) as a:
        a.join("hostile", min_nodes=1, max_nodes=1, max_restarts=1,
               hostname=HOSTILE)
        gen = a.wait_assignment().generation
        a.report(gen, "FAILED", message="worker says " + HOSTILE)
        for args in (("status",), ("status", "hostile"), ("status", "--all"),
                     ("events", "hostile")):
            cp = h.check(h.ctl(d.addr, *args, fixed=False))
            no_control(cp.stdout + cp.stderr, "rdzvctl " + " ".join(args))
        cp = h.ctl(d.addr, "status", "hostile", fixed=False)
        assert ("\\e[31mRED\\e]0;pwned\\x07\\nfake\\r\\u009b2J\\u202etxt.exe"
                in cp.stdout), cp.stdout

        with rt.Proc([h.RDZVCTL, "--server", d.addr, "status", "hostile",
                      "--watch"]) as w:
            w.wait_line(r"node 1 .*RED")
        no_control("\n".join(w.lines), "rdzvctl status --watch")

        cp = h.check(h.ctl(d.addr, "status", "hostile", "-o", "json", fixed=False))
        no_control(cp.stdout.replace("\n", " "), "rdzvctl -o json")
        assert "\\u009b2J\\u202etxt.exe" in cp.stdout, cp.stdout
        job = json.loads(cp.stdout)
        assert job["nodes"][0]["hostname"] == HOSTILE

        assert d.stop() == 0
        no_control("\n".join(d.lines), "rdzvd's log")
