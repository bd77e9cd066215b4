"""docs/control-api.schema.json is a valid JSON Schema, and the check every end-to-end test runs on
its control trace (conftest.check_control_trace) refuses what the API does not send."""
import json

import pytest
from jsonschema import Draft202012Validator

from conftest import SCHEMA_PATH, check_control_trace

PEER_ID = "a" * 52


def test_the_schema_is_a_valid_draft_2020_12_schema():
    Draft202012Validator.check_schema(json.load(open(SCHEMA_PATH)))


@pytest.mark.parametrize("line, ok", [
    ({"id": 1, "ok": True, "sent": {"id": "x", "room": "lab", "recipients": 1, "sent_now": 1, "dropped": 0, "reliable": True}}, True),
    ({"id": 2, "ok": False, "error": {"code": "unknown_peer", "message": "no peer matches 'x'"}}, True),
    ({"ok": True, "event": {"type": "member", "time": "2026-11-22T02:42:09.154Z",
                            "member": {"room": "lab", "name": "bob", "id": PEER_ID, "state": "connected"}}}, True),
    ({"id": 3, "ok": False}, False),                                               # a failure without its error
    ({"ok": True, "event": {"type": "teleported", "time": "2026-11-22T02:42:09.154Z"}}, False),
    ({"id": 4, "ok": True, "sent": {"id": "x", "room": "lab", "recipients": "1", "sent_now": 1, "dropped": 0, "reliable": True}}, False),
    ({"id": 5, "ok": True, "mystery": 1}, False),                                  # an undocumented field
])
def test_the_trace_check_refuses_what_the_api_does_not_send(tmp_path, line, ok):
    trace = tmp_path / "trace.jsonl"
    trace.write_text(json.dumps(line) + "\n")
    if ok:
        assert check_control_trace(str(trace)) == 1
    else:
        with pytest.raises(AssertionError, match="does not match"):
            check_control_trace(str(trace))
