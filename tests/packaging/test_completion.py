"""bash completion for rdzv-agent and rdzvctl (deploy/completion/), run by
bash with bash-completion as a shell would on TAB: commands, options read
from --help, option values, the workers' command after --, and job and
node names asked of a real rdzvd.
"""

import os
import re
import subprocess
import time

import pytest

import rdzvtest

BASH_COMPLETION = "/usr/share/bash-completion/bash_completion"
COMPLETION = os.path.join(rdzvtest.SOURCE_ROOT, "deploy", "completion")

# Sources bash-completion and one of ours, sets COMP_LINE and COMP_WORDS
# as bash would, calls the function `complete -p` names and prints
# COMPREPLY, one per line.
DRIVER = r'''
source "$BASH_COMPLETION"
source "$1"
COMP_LINE=$2
COMP_POINT=${#COMP_LINE}
shift 2
COMP_WORDS=("$@")
COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
spec=$(complete -p "$1")
func=${spec#*-F }
func=${func%% *}
"$func" "$1" "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"
printf '%s\n' "${COMPREPLY[@]}"
'''


@pytest.fixture(scope="module", autouse=True)
def bash_completion():
    if not os.path.exists(BASH_COMPLETION):
        pytest.skip("bash-completion is missing: deploy/install-deps.sh "
                    "test installs it")


def comp_words(words):
    """COMP_WORDS for a command line of |words|: bash also breaks words at
    the characters of COMP_WORDBREAKS (`--server=h:1` is `--server`, `=`,
    `h`, `:`, `1`), and the completion must put them together again."""
    out = []
    for w in words:
        out += [p for p in re.split(r"([=:@]+)", w) if p] or [""]
    if re.search(r"[=:@]$", words[-1]):
        out.append("")
    return out


def complete(*words, timeout=10):
    """What TAB offers after |words|, the last of which is being typed."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RDZV_")}
    env["PATH"] = os.pathsep.join([
        rdzvtest.build_path("client", "agent"),
        rdzvtest.build_path("client", "ctl"), env.get("PATH", "")])
    env["BASH_COMPLETION"] = BASH_COMPLETION
    r = subprocess.run(["bash", "-c", DRIVER, "bash",
                        os.path.join(COMPLETION, words[0]), " ".join(words)]
                       + comp_words(words),
                       capture_output=True, text=True, timeout=timeout,
                       env=env, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    return sorted(w for w in r.stdout.splitlines() if w)


def test_rdzvctl_commands_and_options():
    assert complete("rdzvctl", "") == sorted(
        ["status", "close", "abort", "evict", "events", "server", "wait",
         "hosts", "host", "help"])
    assert complete("rdzvctl", "host", "") == ["clear", "quarantine"]
    assert complete("rdzvctl", "hosts", "--state", "q") == ["quarantined"]
    assert complete("rdzvctl", "st") == ["status"]
    assert complete("rdzvctl", "wait", "--ti") == ["--timeout"]
    assert complete("rdzvctl", "help", "ev") == ["events", "evict"]
    assert complete("rdzvctl", "status", "--w") == ["--watch"]
    assert complete("rdzvctl", "abort", "x", "--r") == ["--reason"]
    assert complete("rdzvctl", "-o", "") == ["json", "text"]
    assert complete("rdzvctl", "--output=j") == ["json"]
    # Every option `rdzvctl events --help` names, and only those.
    want = subprocess.run(
        [rdzvtest.build_path("client", "ctl", "rdzvctl"), "events",
         "--help"], capture_output=True, text=True, check=True).stdout
    got = complete("rdzvctl", "events", "--")
    assert "--after" in got and "--limit" in got and "--server" in got
    assert all(o in want for o in got)
    # An option's value is not completed as a command.
    assert complete("rdzvctl", "--server", "") == []


def test_rdzv_agent_commands_options_and_the_workers_command():
    assert complete("rdzv-agent", "") == ["coproc", "gpucheck", "help", "join"]
    assert complete("rdzv-agent", "--v") == ["--version"]
    assert complete("rdzv-agent", "join", "--nproc") == ["--nproc-per-node"]
    assert complete("rdzv-agent", "join", "--rej") == ["--rejoin-timeout"]
    assert complete("rdzv-agent", "join", "--nproc-per-node", "") == \
        ["auto", "gpu"]
    assert complete("rdzv-agent", "join", "--gpucheck", "ex") == ["exclude"]
    assert complete("rdzv-agent", "join", "--health-check", "") == \
        ["exclude", "off", "strict", "warn"]
    assert complete("rdzv-agent", "join", "--log-level", "d") == ["debug"]
    assert complete("rdzv-agent", "gpucheck", "-o", "") == ["json", "table"]
    assert "--bytes" in complete("rdzv-agent", "gpucheck", "--")
    # help COMMAND: the commands, and nothing after the one.
    assert complete("rdzv-agent", "help", "") == ["coproc", "gpucheck", "join"]
    assert complete("rdzv-agent", "coproc", "--nproc") == ["--nproc-per-node"]
    assert complete("rdzv-agent", "coproc", "--rej") == ["--rejoin-timeout"]
    assert complete("rdzv-agent", "help", "j") == ["join"]
    assert complete("rdzv-agent", "help", "join", "") == []
    assert complete("rdzv-agent", "join", "--att") == ["--attempt"]
    assert complete("rdzvctl", "wait", "--att") == ["--attempt"]
    assert complete("rdzvctl", "wait", "--must") == ["--must-exist"]
    assert complete("rdzvctl", "wait", "--app") == ["--appear-timeout"]
    # After --, the workers' command, then its own arguments.
    assert "true" in complete("rdzv-agent", "join", "--id", "j", "--tee",
                              "--", "tru")
    assert "true" in complete("rdzv-agent", "join", "--nnodes", "2",
                              "tru")


def test_job_and_node_names_come_from_rdzvd(tmp_path):
    with rdzvtest.Daemon(tmp_path) as d:
        server = "127.0.0.1:%d" % d.port
        # A job of two nodes that one agent joined: it waits.
        agent = rdzvtest.Proc([
            rdzvtest.build_path("client", "agent", "rdzv-agent"), "join",
            "--server", server, "--id", "waiting-job", "--nnodes", "2",
            "--log-dir", str(tmp_path / "logs"), "--", "/bin/true"])
        with agent:
            agent.wait_line(r"joined job waiting-job as node id (\d+)")
            node = agent.wait_line(r"as node id (\d+)").group(1)
            assert complete("rdzvctl", "--server", server, "abort", "w") \
                == ["waiting-job"]
            # --must-exist takes no value: the job id comes after it.
            assert complete("rdzvctl", "--server", server, "wait",
                            "--must-exist", "w") == ["waiting-job"]
            assert complete("rdzvctl", "status", "--server=" + server,
                            "") == ["waiting-job"]
            got = complete("rdzvctl", "--server", server, "evict",
                           "waiting-job", "")
            assert node in got and len(got) == 2, got
            assert complete("rdzvctl", "--server", server, "events",
                            "waiting-job", "") == []
            agent.stop()


def test_an_unreachable_rdzvd_does_not_hang_the_shell():
    start = time.monotonic()
    # 192.0.2.1 (TEST-NET-1) never answers: the connect itself times out.
    assert complete("rdzvctl", "--server", "192.0.2.1:29400", "status",
                    "") == []
    assert time.monotonic() - start < 8
