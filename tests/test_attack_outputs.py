"""Findings of a review of the "outputs" merge (an NPS switch in the summary, ``ControllerError.sent``).

Each xfail(strict=True) test states the behaviour the review expects and fails on the merged
code: when a fix lands it passes, and strict turns that into a failure that says to drop the mark.

* After an upgrade, a refusal drain set under the old wording is rewritten once, because the
  summary's words changed (``policy._says``), though the drain, its cause and its fingerprint
  are the same.
"""

from __future__ import annotations

import json
import socket
import struct
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from scontrolfake import Slurm

from spurinv import exitcode
from spurinv.controller.ownership import reason_for


def _refresh(cli: Any, state: Path, config: Path, root: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    result = cli("refresh", "--root", root, "--state", state, "--config", config, "--json", *extra)
    return result.code, result.json()


# --- the old wording of our own refusal drain, after an upgrade ------------------------------


@pytest.mark.xfail(strict=True, reason="policy._says compares words: an upgrade's new summary rewrites our own drain once")
def test_a_refusal_drain_in_the_old_wording_is_not_rewritten_after_an_upgrade(cli, built, tmp_path, monkeypatch):
    lab = Slurm(tmp_path, refuse_gres=True)
    lab.update(gres="gpu:mi300x:64")
    monkeypatch.setenv("FAKE_SLURM_STATE", str(lab.path))
    for _ in range(2):
        assert _refresh(cli, lab.state, lab.config, built("mi300x-cpx"))[0] == exitcode.OK
    _refresh(cli, lab.state, lab.config, built("mi300x-spx-nps4"))
    code, document = _refresh(cli, lab.state, lab.config, built("mi300x-spx-nps4"))
    assert code == exitcode.PROTOCOL, document
    new = lab.node["reason"]
    assert "CPX/NPS1→SPX/NPS4" in new
    # what the code before the merge wrote for the same switch (its summary had no memory mode)
    old_text = new.split("] ", 1)[1].replace("CPX/NPS1→SPX/NPS4", "CPX→SPX")
    old = reason_for("n1", new[len("spurinv: [") :][:4], old_text)
    saved = json.loads(lab.state.read_text())
    saved["drain"]["reason"] = old
    lab.state.write_text(json.dumps(saved))
    extra = json.loads(lab.node["extra"])
    extra["spurinv"]["drain"].update(reason=old, id=old[len("spurinv: [") :][:8])
    lab.update(reason=old, extra=json.dumps(extra))
    before = len(lab.calls())

    code, document = _refresh(cli, lab.state, lab.config, built("mi300x-spx-nps4"))

    assert code == exitcode.PROTOCOL, document
    assert "drain" not in [step["action"] for step in document["steps"]], document["steps"]
    assert [call for call in lab.calls()[before:] if call[:1] == ["update"]] == []
    assert lab.node["reason"] == old


# --- one request over a kept-alive connection: "sent" as the server saw it -------------------


def _node_body() -> bytes:
    from faultserver import capture

    document = capture("node-n1-idle")
    document["nodes"][0]["name"] = "n1"
    return json.dumps(document).encode()


def _read_request(conn: socket.socket) -> str | None:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    length = next((int(v) for k, _, v in (line.partition(b":") for line in head.split(b"\r\n")[1:])
                   if k.strip().lower() == b"content-length"), 0)  # fmt: skip
    while len(rest) < length:
        rest += conn.recv(65536)
    return head.split(b" ", 1)[0].decode()


def _keep_alive(listener: socket.socket, after_get: str, seen: list[str]) -> None:
    """Answer the GET and keep the connection; then, for the POST, do ``after_get``."""
    body = _node_body()
    conn, _ = listener.accept()
    seen.append(_read_request(conn) or "")
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    if after_get == "close, stop listening":  # the keep-alive connection closed, slurmrestd gone
        conn.close()
        listener.close()
        return
    seen.append(_read_request(conn) or "")  # the POST arrived on the kept connection
    if after_get == "read the write, reset":
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    conn.close()


@pytest.mark.parametrize(
    ("after_get", "sent", "posts"),
    [("close, stop listening", False, 0), ("read the write, close", True, 1), ("read the write, reset", True, 1)],
)
def test_a_write_after_a_kept_alive_read_is_sent_exactly_when_the_server_got_it(after_get, sent, posts):
    from spurinv.config.settings import ControllerSection
    from spurinv.controller.rest import Controller
    from spurinv.errors import ControllerError

    listener = socket.create_server(("127.0.0.1", 0))
    seen: list[str] = []
    server = threading.Thread(target=_keep_alive, args=(listener, after_get, seen), daemon=True)
    server.start()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    client = Controller(ControllerSection(url=url, api="slurm/v0.0.42", timeout=2), "n1", None)
    client.view()
    time.sleep(0.1)  # the server's close reaches the client before the write starts

    with pytest.raises(ControllerError) as failed:
        client.post({"state": ["DRAIN"], "reason": "x"})
    server.join(5)
    listener.close()

    assert seen.count("POST") == posts
    assert failed.value.sent is sent, failed.value.message
