import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from testlan import TestLAN  # noqa: E402


@pytest.fixture
def lan(request, tmp_path_factory):
    """A fresh simulated LAN per test, torn down even when the test fails. On failure the daemons'
    logs are printed, so CI output says what happened. Its hosts see pytest's temporary directories."""
    network = TestLAN(keep=[tmp_path_factory.getbasetemp()])
    yield network
    failed = getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed
    if failed:
        for daemon in network.daemons:
            print(f"\n--- lanchatd log on {daemon.host} ({daemon.log_path}):\n{daemon.log()[-6000:]}")
    network.down(keep=failed)


@pytest.hookimpl(tryfirst=True, hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    setattr(item, "rep_" + report.when, report)
