"""The files in deploy/ are what operators copy: they must parse."""

import os
import shutil
import subprocess

import pytest

import rdzvtest as rt

RDZVD = rt.build_path("daemon", "rdzvd")
DEPLOY = os.path.join(rt.SOURCE_ROOT, "deploy")


def test_example_config_parses():
    r = subprocess.run([RDZVD, "--config", os.path.join(DEPLOY, "rdzvd.conf.example"),
                        "--check-config"], capture_output=True, text=True, timeout=20)
    assert r.returncode == 0, r.stderr
    assert "listen = 127.0.0.1:29400" in r.stdout
    assert "listen = unix:/run/rdzv/rdzvd.sock" in r.stdout
    assert "log-level = info" in r.stdout


@pytest.mark.skipif(shutil.which("systemd-analyze") is None,
                    reason="systemd-analyze is not installed")
def test_systemd_unit_verifies(tmp_path):
    # verify insists that ExecStart exists: point it at the built binary.
    with open(os.path.join(DEPLOY, "systemd", "rdzvd.service")) as f:
        unit = f.read().replace("/usr/local/bin/rdzvd", RDZVD)
    path = tmp_path / "rdzvd.service"
    path.write_text(unit)
    r = subprocess.run(["systemd-analyze", "verify", str(path)],
                       capture_output=True, text=True, timeout=60)
    # verify exits 0 on unknown keys and bad values; it only prints them.
    problems = [l for l in r.stderr.splitlines() if "rdzvd.service" in l]
    assert r.returncode == 0 and not problems, r.stderr
    assert "Type=notify" in unit
