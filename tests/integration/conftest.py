"""pytest settings shared by every integration test."""


def pytest_sessionfinish(session, exitstatus):
    """When every test of a run was skipped, exit 77, which meson counts as
    a skip: a missing need then shows in the suite's count instead of
    passing silently."""
    tr = session.config.pluginmanager.get_plugin("terminalreporter")
    if tr is None or exitstatus != 0:
        return
    st = tr.stats
    if st.get("skipped") and not any(st.get(k) for k in ("passed", "failed", "error")):
        session.exitstatus = 77
