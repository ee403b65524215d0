"""spur's REST gateway: Slurm-shaped GETs, no node write route (docs/spur.md §2) → a read-only gateway."""

from __future__ import annotations

from faultserver import FaultServer, Reply

from spurinv import exitcode

SPUR_NODE = {
    "meta": {"Slurm": {"version": {"major": 0, "minor": 0, "micro": 42}, "release": "spur 0.1.0"}},
    "nodes": [{"name": "gpu1", "state": "idle", "reason": None, "partitions": ["gpu"], "cpus": 192, "alloc_cpus": 0,
               "real_memory": 1547771, "free_mem": 1500000, "cpu_load": 12}],
}  # fmt: skip


def test_a_gateway_without_write_routes_is_69_and_status_says_so(cli, built, tmp_path, env):
    with FaultServer() as server:
        server.script("GET", "/slurm/v0.0.42/node/gpu1", Reply(200, SPUR_NODE))
        server.script("POST", "/slurm/v0.0.42/node/gpu1", Reply(405, "Method Not Allowed"))
        (tmp_path / "config.toml").write_text(f'[node]\nname = "gpu1"\n[controller]\nurl = "{server.url}"\n')
        state = tmp_path / "state.json"
        root = built("mi300x-spx")
        cli("refresh", "--root", root, "--state", state, "--confirm-interval", "0")

        result = cli("refresh", "--root", root, "--state", state, "--confirm-interval", "0", "--json")

        assert exitcode.UNAVAILABLE == result.code, result.out
        error = result.json()["steps"][-1]["error"]
        assert "read-only gateway" in error
        assert [r.method for r in server.seen].count("POST") == 1
    status = cli("status", "--state", state, "--json").json()
    assert status["backoff"]["kind"] == "read-only"
    assert status["api"]["version"] == "slurm/v0.0.42"
    assert any("read-only gateway" in note for note in status["attention"])
