import json
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from testlan import ROOT, TestLAN  # noqa: E402

SCHEMA_PATH = os.path.join(ROOT, "docs", "control-api.schema.json")
_validated = {"lines": 0, "tests": 0}


def _validator():
    from jsonschema import Draft202012Validator
    schema = json.load(open(SCHEMA_PATH))
    # Everything a client reads is a response (answers, and events after `watch`).
    return Draft202012Validator({"$schema": schema["$schema"], "$defs": schema["$defs"], "$ref": "#/$defs/response"})


def check_control_trace(path):
    """Every control answer and event the test's clients read must match docs/control-api.schema.json.
    Returns how many lines were checked, or raises AssertionError naming the first that does not."""
    if not os.path.exists(path):
        return 0
    validator = _validator()
    count = 0
    with open(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            try:
                value = json.loads(raw)
            except ValueError:
                raise AssertionError(f"control trace line {number} is not JSON: {raw[:300]!r}") from None
            error = next(iter(sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))), None)
            if error is not None:
                where = "/".join(str(p) for p in error.absolute_path) or "(top)"
                raise AssertionError(f"a control answer does not match docs/control-api.schema.json at {where}: {error.message}\n"
                                     f"line {number}: {raw[:600].decode(errors='replace')}")
            count += 1
    return count


@pytest.fixture
def lan(request, tmp_path_factory):
    """A fresh simulated LAN per test, torn down even when the test fails. On failure the daemons'
    logs are printed, so CI output says what happened. Its hosts see pytest's temporary directories.
    After the test, every control answer and event its clients read is checked against the schema."""
    network = TestLAN(keep=[tmp_path_factory.getbasetemp()])
    yield network
    failed = getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed
    schema_problem = None
    if not failed:
        try:
            _validated["lines"] += check_control_trace(network.trace)
            _validated["tests"] += 1
        except AssertionError as error:
            schema_problem = str(error)
    if failed or schema_problem:
        for daemon in network.daemons:
            # Tests poll the control socket many times a second: those debug lines would fill the tail.
            lines = [line for line in daemon.log().splitlines(keepends=True) if 'msg="control request"' not in line]
            print(f"\n--- lanchatd log on {daemon.host} ({daemon.log_path}), control requests left out:\n{''.join(lines)[-6000:]}")
    network.down(keep=failed or schema_problem is not None)
    if schema_problem:
        pytest.fail(schema_problem)


@pytest.hookimpl(tryfirst=True, hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    setattr(item, "rep_" + report.when, report)


def pytest_terminal_summary(terminalreporter):
    if _validated["tests"]:
        terminalreporter.write_line(
            f"control API schema: {_validated['lines']} answers and events from {_validated['tests']} tests "
            f"validated against docs/control-api.schema.json")
