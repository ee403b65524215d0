"""One atomic writer (``store.write_atomic``) for the state, the metrics and ``config init``."""

from __future__ import annotations

import os
import stat

import pytest

from spurinv.report import metrics
from spurinv.state import store


@pytest.fixture
def strict_umask():
    previous = os.umask(0o077)
    yield
    os.umask(previous)


def test_metrics_are_0644_whatever_the_umask_and_leave_no_temporary(tmp_path, strict_umask):
    path = tmp_path / "spurinv.prom"
    path.write_text("old\n")

    metrics.write(str(path), "spurinv_info 1\n")

    assert path.read_text() == "spurinv_info 1\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert sorted(os.listdir(tmp_path)) == ["spurinv.prom"]


def test_metrics_need_the_collectors_directory(tmp_path):
    with pytest.raises(store.StoreError) as raised:
        metrics.write(str(tmp_path / "missing" / "spurinv.prom"), "x\n")

    assert raised.value.exit_code == 73
    assert not (tmp_path / "missing").exists()


def test_config_init_is_atomic_0640_and_replaces_a_symlink_instead_of_following_it(cli, tmp_path, strict_umask):
    victim = tmp_path / "victim"
    victim.write_text("someone else's file\n")
    path = tmp_path / "etc" / "config.toml"
    path.parent.mkdir()
    path.symlink_to(victim)

    result = cli("config", "init", path, "--force")

    assert 0 == result.code, result.err
    assert victim.read_text() == "someone else's file\n"
    assert not path.is_symlink()
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert "[controller]" in path.read_text()
    assert sorted(os.listdir(path.parent)) == ["config.toml"]
