"""What a request looks like in ``status``, the report and the log (:class:`spurinv.transport.Request`):
the same line whichever transport sent it (issue #26: no test pinned it)."""

from __future__ import annotations

from spurinv.transport import Request


def test_a_request_line_is_method_path_then_the_body_as_sorted_json_then_the_status():
    drain = Request("POST", "/slurm/v0.0.42/node/n1", {"state": ["DRAIN"], "reason": "spurinv: x"}, 200)

    assert drain.line() == 'POST /slurm/v0.0.42/node/n1 {"reason": "spurinv: x", "state": ["DRAIN"]} → 200'


def test_a_request_without_a_body_or_a_status_shows_neither():
    assert Request("GET", "/slurm/v0.0.42/node/n1", None).line() == "GET /slurm/v0.0.42/node/n1"
    assert Request("EXEC", "scontrol --json show node n1", None, 0).line() == "EXEC scontrol --json show node n1 → 0"
    assert Request("POST", "/x", {}, None).line() == "POST /x {}"  # an empty body is a body


def test_a_request_as_a_dict_keeps_every_field():
    request = Request("POST", "/x", {"a": 1}, 500)

    assert request.as_dict() == {"method": "POST", "path": "/x", "body": {"a": 1}, "status": 500}
