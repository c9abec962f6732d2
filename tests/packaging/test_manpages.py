"""The man pages against the programs' own option tables.

Every option that `--help` names (rdzvd's, and rdzv-agent's and rdzvctl's
for the program and each command) must be defined in its man page, and
every option a man page defines must be named by that --help and taken by
the program, so that a flag cannot be added, renamed or removed without its
page. Nothing here lists the options: they are read from --help, which
rdzvd builds from its settings table, so a new setting is caught at once.

A page defines an option on a line of its scdoc source that starts with the
option in bold (`*--name* _VALUE_`, several on one line for aliases): in
OPTIONS for the program, in a `## COMMAND` subsection of COMMANDS for a
command. rdzvd.conf(5) defines each setting as `*name* = _VALUE_`.
"""

import os
import re
import shutil
import subprocess

import pytest

import installed
import rdzvtest

MAN = os.path.join(rdzvtest.SOURCE_ROOT, "docs", "man")
PROGRAMS = {
    "rdzvd": rdzvtest.build_path("daemon", "rdzvd"),
    "rdzv-agent": rdzvtest.build_path("client", "agent", "rdzv-agent"),
    "rdzvctl": rdzvtest.build_path("client", "ctl", "rdzvctl"),
}
PAGES = {"rdzvd": "rdzvd.8", "rdzv-agent": "rdzv-agent.1",
         "rdzvctl": "rdzvctl.1"}

# Options the programs take whose --help does not name them: rdzvd's usage
# (daemon/frame/config.c) leaves out -c and its --help and --version,
# rdzv-agent's (client/agent/main.c) its -h and --version. Their pages define them, and
# the probe below shows the programs take them.
UNLISTED = {
    "rdzvd": {"-c", "-h", "--help", "-V", "--version"},
    "rdzv-agent": {"-h", "--version"},
    "rdzvctl": set(),
}

# An option in a help text: one or two dashes and a letter, not inside a
# word ("non-loopback", "multi-node").
OPTION = re.compile(r"(?<![\w-])(--?[A-Za-z][-A-Za-z0-9]*)")
BOLD_OPTION = re.compile(r"\*(--?[A-Za-z][-A-Za-z0-9]*)\*")
REFUSED = re.compile(r"unrecognized option|invalid option|unknown option|"
                     r"unknown command")


def clean_env():
    """The environment without what the programs read as defaults, and
    with no libcuda to load."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("RDZV_", "SLURM_", "PBS_"))}
    env["RDZV_LIBCUDA"] = "/nonexistent/libcuda.so.1"
    return env


def run(argv):
    return subprocess.run(argv, capture_output=True, text=True, timeout=20,
                          env=clean_env(), stdin=subprocess.DEVNULL)


def help_text(prog, *cmd):
    r = run([PROGRAMS[prog]] + list(cmd) + ["--help"])
    assert r.returncode == 0, r.stderr
    return r.stdout


def help_options(text):
    return set(OPTION.findall(text))


def help_commands(text):
    """The commands of a `commands:` block: lines indented by two spaces."""
    out, inside = [], False
    for line in text.splitlines():
        if line == "commands:":
            inside = True
        elif inside and not line.strip():
            break
        elif inside:
            m = re.match(r"  ([a-z][-a-z]*)", line)
            if m:
                out.append(m.group(1))
    return out


def page_sections(page):
    """The lines of a scdoc source by section: 'OPTIONS', ..., and
    ('COMMANDS', NAME) for each `## NAME` of COMMANDS."""
    sections, key = {}, None
    with open(os.path.join(MAN, page + ".scd")) as f:
        for line in f.read().splitlines():
            if line.startswith("# "):
                key = line[2:].strip()
            elif line.startswith("## "):
                key = (key if isinstance(key, str) else key[0],
                       line[3:].split()[0])
            sections.setdefault(key, []).append(line)
    return sections


def defined(lines):
    """The options defined on definition lines (starting `*-`)."""
    out = set()
    for line in lines or ():
        if line.startswith("*-"):
            out.update(BOLD_OPTION.findall(line))
    return out


def accepted(prog, cmd, opt):
    """Whether the program takes |opt| there: it does not call it unknown.
    Each probe ends before doing anything: rdzvd only checks its config,
    the others stop at --help (rdzv-agent join without --id and a command
    stops at once, with or without it)."""
    if prog == "rdzvd":
        argv = [PROGRAMS[prog], "--config", "/dev/null", "--check-config",
                opt, "1"]
    elif prog == "rdzv-agent" and cmd is None:
        argv = [PROGRAMS[prog], opt]
    else:
        argv = [PROGRAMS[prog]] + ([cmd] if cmd else []) + [opt, "1",
                                                           "--help"]
    r = run(argv)
    return not REFUSED.search(r.stdout + r.stderr), r.stdout + r.stderr


def check_accepted(prog, cmd, options):
    # The probe must see a refusal where there is one.
    ok, out = accepted(prog, cmd, "--no-such-option")
    assert not ok, "the probe of %s %s missed a bad option:\n%s" % (
        prog, cmd or "", out)
    refused = {}
    for opt in sorted(options):
        ok, out = accepted(prog, cmd, opt)
        if not ok:
            refused[opt] = out.strip()
    assert not refused, "%s%s refuses options its man page defines: %s" % (
        prog, " " + cmd if cmd else "", refused)


def test_rdzvd_page_matches_help():
    page = PAGES["rdzvd"] + ".scd"
    listed = help_options(help_text("rdzvd"))
    doc = defined(page_sections(PAGES["rdzvd"]).get("OPTIONS"))
    assert not listed - doc, (
        "rdzvd --help names options that docs/man/%s does not define: %s"
        % (page, sorted(listed - doc)))
    assert not doc - listed - UNLISTED["rdzvd"], (
        "docs/man/%s defines options that rdzvd --help does not name: %s"
        % (page, sorted(doc - listed - UNLISTED["rdzvd"])))
    check_accepted("rdzvd", None, doc)


def rdzvd_settings():
    """The settings block of rdzvd --help: `  --name   description`."""
    text = help_text("rdzvd")
    block = text[text.index("\nsettings"):]
    return set(re.findall(r"^  --([a-z][-a-z0-9]*)\s", block, re.M))


def test_rdzvd_conf_page_matches_settings():
    settings = rdzvd_settings()
    assert "listen" in settings and "shutdown-timeout" in settings
    keys = set()
    for line in page_sections("rdzvd.conf.5").get("SETTINGS", ()):
        m = re.match(r"\*([a-z][-a-z0-9]*)\* = ", line)
        if m:
            keys.add(m.group(1))
    assert not settings - keys, (
        "settings of rdzvd --help that docs/man/rdzvd.conf.5.scd does not "
        "define: %s" % sorted(settings - keys))
    assert not keys - settings, (
        "docs/man/rdzvd.conf.5.scd defines settings rdzvd does not have: %s"
        % sorted(keys - settings))


def test_example_config_names_every_setting():
    # rdzvd.conf(5) sends readers to the example for every setting and its
    # default; the package installs it as /etc/rdzv/rdzvd.conf.
    path = os.path.join(rdzvtest.SOURCE_ROOT, "deploy", "rdzvd.conf.example")
    with open(path) as f:
        named = set(re.findall(r"^#?([a-z][-a-z0-9]*) = ", f.read(), re.M))
    missing = rdzvd_settings() - named
    assert not missing, ("deploy/rdzvd.conf.example has no line (set or "
                         "commented out) for %s" % sorted(missing))


@pytest.mark.parametrize("prog", ["rdzv-agent", "rdzvctl"])
def test_command_pages_match_help(prog):
    page = "docs/man/%s.scd" % PAGES[prog]
    sections = page_sections(PAGES[prog])
    top = help_text(prog)
    commands = help_commands(top)
    assert commands, "no commands in %s --help" % prog
    documented = [k[1] for k in sections if isinstance(k, tuple)
                  and k[0] == "COMMANDS"]
    assert sorted(commands) == sorted(documented), (
        "%s's commands are %s, %s documents %s" % (prog, commands, page,
                                                   documented))

    # Options of the program (rdzvctl: those every command takes).
    top_doc = defined(sections.get("OPTIONS"))
    top_listed = help_options(top)
    every_doc = set(top_doc)
    for cmd in commands:
        listed = help_options(help_text(prog, cmd))
        doc = defined(sections.get(("COMMANDS", cmd)))
        every_doc |= doc
        assert not listed - doc - top_doc, (
            "`%s %s --help` names options that %s does not define: %s"
            % (prog, cmd, page, sorted(listed - doc - top_doc)))
        assert not doc - listed - UNLISTED[prog], (
            "%s defines options under %s that `%s %s --help` does not name: "
            "%s" % (page, cmd, prog, cmd, sorted(doc - listed)))
        check_accepted(prog, cmd, doc)
    assert not top_listed - every_doc, (
        "%s --help names options that %s does not define: %s"
        % (prog, page, sorted(top_listed - every_doc)))
    assert not top_doc - top_listed - UNLISTED[prog], (
        "%s defines options in OPTIONS that %s --help does not name: %s"
        % (page, prog, sorted(top_doc - top_listed - UNLISTED[prog])))
    check_accepted(prog, None, top_doc)


def test_pages_are_built_and_render_cleanly():
    why = installed.man_pages_not_built(rdzvtest.BUILD_ROOT)
    if why:
        pytest.skip(why)
    if shutil.which("groff") is None:
        pytest.skip("groff is missing (Debian: groff-base)")
    for page in installed.MAN_PAGES:
        page = rdzvtest.build_path("docs", "man", page)
        r = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-z", page],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 0 and not r.stderr, (page, r.stderr)
        # The NAME line is what man -k and whatis show.
        if shutil.which("lexgrog") is None:
            continue
        r = subprocess.run(["lexgrog", page], capture_output=True, text=True,
                           timeout=30)
        assert r.returncode == 0 and " - " in r.stdout, (page, r.stdout)
