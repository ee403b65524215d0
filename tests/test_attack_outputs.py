"""Findings of a review of the "outputs" merge (an NPS switch in the summary, ``ControllerError.sent``).

Each xfail(strict=True) test states the behaviour the review expects and fails on the merged
code: when a fix lands it passes, and strict turns that into a failure that says to drop the mark.

The findings are fixed; what is left here passes.
"""

from __future__ import annotations

import json
import socket
import struct
import threading
import time

import pytest

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
