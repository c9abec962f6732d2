"""What a new user ran into (issue 44, section 2), each tried as a new user
would, against the real programs: the words they say and the exit status.
(`rdzvctl wait nosuchjob`'s line is in ctl/test_ctl_wait.py, the open-file
limit's in test_rdzvd_transport.py.)
"""

import os
import re
import subprocess
import time

import rdzvtest as rt

RDZVD = rt.build_path("daemon", "rdzvd")
AGENT = rt.build_path("client", "agent", "rdzv-agent")
CTL = rt.build_path("client", "ctl", "rdzvctl")


def run(argv, timeout=30, **kw):
    return subprocess.run(argv, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL, **kw)


def test_rdzvd_bad_option_is_one_line():
    """rdzvd --bogus: one line pointing at --help, exit 2, as rdzv-agent
    and rdzvctl say it; a missing value and a stray argument too."""
    for argv, line in (
            (["--bogus"], "rdzvd: unknown option '--bogus'; see 'rdzvd --help'"),
            (["-x"], "rdzvd: unknown option '-x'; see 'rdzvd --help'"),
            (["--listen"], "rdzvd: option '--listen' needs a value; see "
             "'rdzvd --help'"),
            (["stray"], "rdzvd: unexpected argument 'stray'; see 'rdzvd "
             "--help'")):
        cp = run([RDZVD] + argv)
        assert cp.returncode == 2, cp
        assert cp.stderr == line + "\n", cp.stderr
        assert cp.stdout == "", cp.stdout
    agent = run([AGENT, "join", "--bogus"])
    ctl = run([CTL, "--bogus"])
    assert (agent.returncode, ctl.returncode) == (2, 2)
    assert len(agent.stderr.splitlines()) == len(ctl.stderr.splitlines()) == 1


def test_unresolvable_server_says_so():
    """A --server whose host name does not resolve says that, not "is
    rdzvd running?"; rdzvctl exits 5 (unavailable), the agent 5 after its
    connect timeout."""
    cp = run([CTL, "--server", "nosuch.invalid:29400", "status"])
    assert cp.returncode == 5, cp
    assert cp.stderr.startswith("rdzvctl: nosuch.invalid:29400: cannot "
                                "resolve nosuch.invalid"), cp.stderr
    assert cp.stderr.endswith("(the host name does not resolve: check "
                              "--server)\n"), cp.stderr
    assert "is rdzvd running" not in cp.stderr
    cp = run([AGENT, "join", "--id", "j", "--server", "nosuch.invalid:29400",
              "--connect-timeout", "1s", "--", "true"])
    assert cp.returncode == 5, cp
    last = cp.stderr.splitlines()[-1]
    assert re.search(r"rdzv-agent: error: cannot reach rdzvd at "
                     r"nosuch.invalid:29400 for 1 s: .*cannot resolve "
                     r"nosuch.invalid.*; the host name does not resolve: "
                     r"check it \(--server, RDZV_SERVER\)$", last), last
    assert "is it running there" not in cp.stderr


def test_missing_database_directory_is_said(tmp_path):
    """--db in a directory that does not exist: rdzvd creates it (0700)
    and warns, naming the highest directory it made."""
    db = os.path.join(str(tmp_path), "no", "such", "x.db")
    d = rt.Daemon(tmp_path, db=db)
    try:
        d.wait_line(r"rdzvd: ready")
        made = os.path.join(str(tmp_path), "no")
        line = d.wait_line(r"rdzvd: warning: database .*", 1).group(0)
        assert line == ("rdzvd: warning: database %s: created %s, which did "
                        "not exist (mode 0700); if the path is a typo, stop "
                        "rdzvd, remove it and give the right --db"
                        % (db, made)), line
        assert os.stat(made).st_mode & 0o777 == 0o700
    finally:
        d.stop()
    # An existing directory: not a word.
    d = rt.Daemon(tmp_path, db=db)
    try:
        d.wait_line(r"rdzvd: ready")
        assert not [l for l in d.lines if "which did not exist" in l]
    finally:
        d.stop()


def test_agent_says_who_is_missing_while_it_waits(tmp_path):
    """One node of three with a join timeout of 12 s: the agent says how
    many nodes are missing and when the job fails, at growing intervals
    (1 s, 2 s, 4 s after rdzvd's news; the next would be 8 s later, after
    the failure), then fails with exit 1."""
    d = rt.Daemon(tmp_path)
    try:
        t0 = time.monotonic()
        a = rt.Proc([AGENT, "join", "--id", "wait3", "--server", d.addr,
                     "--nnodes", "3", "--join-timeout", "12s", "--", "true"])
        rc = a.wait(30)
        took = time.monotonic() - t0
    finally:
        d.stop()
    assert rc == 1, a.output()
    rx = re.compile(r"^(\d\d):(\d\d):(\d\d)\.(\d{3}) rdzv-agent: job wait3: "
                    r"waiting for 2 more nodes \(1 of 3 joined\); fails in "
                    r"(\d+)s$")
    said = [rx.match(l) for l in a.lines if rx.match(l)]
    assert len(said) == 3, a.output()
    at = [int(m.group(1)) * 3600 + int(m.group(2)) * 60 + int(m.group(3)) +
          int(m.group(4)) / 1000 for m in said]
    gaps = [b - a_ for a_, b in zip(at, at[1:])]
    assert gaps[1] > gaps[0] * 1.5, (gaps, a.output())
    left = [int(m.group(5)) for m in said]
    assert left == sorted(left, reverse=True) and left[0] <= 11, left
    assert left[0] - left[2] >= 5, left       # 6 s apart, to the second
    assert "job wait3 failed: join timeout" in a.output()
    assert 11 < took < 30, took


def exit_table(text):
    """The exit-status table of a --help: {status: meaning}."""
    lines = text.split("Exit status (the same in rdzvd, rdzv-agent and "
                       "rdzvctl):\n", 1)[1].splitlines()
    out = {}
    for line in lines:
        m = re.match(r"^  (\d+|128\+N) +(.*)$", line)
        if not m:
            break
        out[m.group(1)] = m.group(2)
    return out


def test_one_exit_table_in_every_help_and_man_page():
    """rdzvd, rdzv-agent (join, coproc) and rdzvctl (and a subcommand)
    print the same exit-status table in --help; each man page's EXIT STATUS
    gives each number it lists the table's meaning."""
    helps = {
        "rdzvd": run([RDZVD, "--help"]),
        "agent join": run([AGENT, "join", "--help"]),
        "agent coproc": run([AGENT, "coproc", "--help"]),
        "rdzvctl": run([CTL, "--help"]),
        "rdzvctl status": run([CTL, "status", "--help"]),
    }
    tables = {}
    for name, cp in helps.items():
        assert cp.returncode == 0, (name, cp)
        tables[name] = exit_table(cp.stdout)
    want = tables["rdzvd"]
    assert sorted(want) == ["0", "1", "128+N", "2", "3", "4", "5", "6"], want
    assert want["3"].startswith("not found")
    assert want["4"].startswith("refused")
    assert want["5"].startswith("rdzvd unavailable")
    assert want["6"].startswith("protocol error")
    for name, t in tables.items():
        assert t == want, (name, t)
    words = {"3": "not found", "4": "refused", "5": "rdzvd unavailable",
             "6": "protocol error"}
    for page in ("rdzvd.8.scd", "rdzv-agent.1.scd", "rdzvctl.1.scd"):
        with open(os.path.join(rt.SOURCE_ROOT, "docs", "man", page)) as f:
            text = f.read()
        sect = text.split("# EXIT STATUS", 1)[1].split("\n# ", 1)[0]
        listed = dict(re.findall(r"^\*(\d+)\*\n\t(.*)$", sect, re.M))
        assert "0" in listed and "2" in listed, (page, listed)
        for n, first in listed.items():
            if n in words:
                assert first.lower().startswith(words[n]), (page, n, first)


def helps():
    """Every --help of the three programs: {name: text}."""
    out = {"rdzvd": run([RDZVD, "--help"]).stdout}
    for cmd in ("join", "coproc", "gpucheck"):
        out["rdzv-agent " + cmd] = run([AGENT, cmd, "--help"]).stdout
    top = run([CTL, "--help"]).stdout
    out["rdzvctl"] = top
    cmds = re.findall(r"^  ([a-z]+) ", top.split("commands:\n", 1)[1]
                      .split("\n\n", 1)[0], re.M)
    assert len(cmds) >= 8, top
    for cmd in cmds:
        out["rdzvctl " + cmd] = run([CTL, cmd, "--help"]).stdout
    return out


def test_help_columns_are_aligned():
    """One layout for every option of every --help: the text from column
    32 (an option too long for its column on a line of its own, its text
    below), never running into the option, nothing past column 79. The
    options that ran into their text are among them."""
    seen = set()
    for name, text in helps().items():
        assert text, name
        lines = text.splitlines()
        for i, line in enumerate(lines):
            assert len(line) <= 79, (name, line)
            if not line.startswith("  -"):
                continue
            opt = line[2:].split("  ")[0]
            seen.add(opt.split()[0].rstrip(","))
            if len(line) > len(opt) + 2:    # option and text on one line
                assert len(opt) <= 28 and line[2 + len(opt):32].strip() == "" \
                    and line[32] != " ", (name, line)
            else:                           # the text on the next line
                nxt = lines[i + 1]
                assert nxt[:32].strip() == "" and nxt[32] != " ", \
                    (name, line, nxt)
    for opt in ("--rank-policy", "--restart", "--max-connections-per-address",
                "--host-quarantine-crashes", "--server", "--tls-cert"):
        assert opt in seen, (opt, sorted(seen))
