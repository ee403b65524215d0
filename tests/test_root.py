"""``RealPaths`` is ``os.path.realpath`` with a memory: it must give realpath's answers."""

from __future__ import annotations

import os

import pytest
import rootbuilder as rb
from effort import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from spurinv.inventory.discovery import discover
from spurinv.inventory.root import Root, _kernel_path


def all_paths(top: str) -> list[str]:
    found: list[str] = []
    for directory, subdirs, files in os.walk(top):
        found.extend(os.path.join(directory, name) for name in subdirs + files)
    return found


@pytest.mark.parametrize("name", ["mi300x-cpx", "mi308x", "host-2pa-pcidomain32bits", "host-procfs", "nvidia-cdi"])
def test_realpaths_agrees_with_os_realpath_on_fixture_roots(built, name):
    root = Root(str(built(name)))
    paths = root.resolver()

    for path in all_paths(root.path):
        assert os.path.realpath(path) == paths.realpath(path), path


@pytest.fixture(scope="module")
def tangled(tmp_path_factory):
    """A tree with loops, dangling, absolute and `..` links (read-only: shared by the examples)."""
    tmp_path = tmp_path_factory.mktemp("tangled")
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "file").write_text("x")
    os.symlink("../b", tmp_path / "a" / "b" / "up")
    os.symlink("loop2", tmp_path / "a" / "loop1")
    os.symlink("loop1", tmp_path / "a" / "loop2")
    os.symlink("nowhere", tmp_path / "a" / "dangling")
    os.symlink(str(tmp_path / "a" / "b"), tmp_path / "a" / "absolute")
    os.symlink("b/up/../file", tmp_path / "a" / "dotdot")
    os.symlink("/etc", tmp_path / "a" / "escape")
    return tmp_path


names = st.sampled_from(["a", "b", "up", "loop1", "loop2", "dangling", "absolute", "dotdot", "file", "..", ".", "x"])


@settings(max_examples=examples(500), deadline=None)
@given(parts=st.lists(names, min_size=1, max_size=6))
def test_realpaths_agrees_on_a_tangled_tree(tangled, parts):
    paths = Root(str(tangled)).resolver()
    path = os.path.join(str(tangled), *parts)

    assert os.path.realpath(path) == paths.realpath(path)


def test_a_link_leaving_the_root_is_refused(tangled):
    paths = Root(str(tangled)).resolver()

    with pytest.raises(OSError, match="leaves the root"):
        paths.resolve(str(tangled / "a" / "escape"))
    with pytest.raises(OSError, match="leaves the root"):  # a directory: the one the proof would take
        paths.directory(str(tangled / "a" / "escape"))
    assert paths.resolve(str(tangled / "a" / "dotdot")) == os.path.realpath(tangled / "a" / "dotdot")


@settings(max_examples=examples(300), deadline=None)
@given(parts=st.lists(names, min_size=1, max_size=6))
def test_the_kernels_answer_is_realpaths_wherever_it_gives_one(tangled, parts):
    path = os.path.join(str(tangled), *parts)
    known = _kernel_path(path)

    assert known is None or known == os.path.realpath(path)
    assert (known is not None) == os.path.exists(path)  # the fast path answers every path that exists


@settings(max_examples=examples(300), deadline=None)
@given(parts=st.lists(names, min_size=1, max_size=6))
def test_a_directory_the_resolution_proves_is_resolves_answer(tangled, parts):
    """``directory`` is ``resolve`` where ``isdir`` would say True, None wherever it would not
    (a file, a loop, a dangling or missing name), and refuses a directory outside the root."""
    paths = Root(str(tangled)).resolver()
    path = os.path.join(str(tangled), *parts)
    real = os.path.realpath(path)
    inside = real == paths.base or real.startswith(paths.inside)

    if os.path.isdir(path) and not inside:
        with pytest.raises(OSError, match="leaves the root"):
            paths.directory(path)
    else:
        assert paths.directory(path) == (real if os.path.isdir(path) else None)


def test_a_device_link_to_a_file_is_no_device(root_copy):
    """DRM and PCI take a device the resolution proved a directory without an isdir: one that is
    a file under the root still fails as a dangling link, as it did with the isdir."""
    root = root_copy("mi300x-spx")
    pci = rb.pci_device_dir(root, "0000:05:00.0")
    rb.symlink(pci / "drm" / "renderD128", "device", "../../vendor")
    functions = root / "sys/bus/pci/devices"
    rb.symlink(functions, "0000:05:00.0", "../../../devices/pci0000:00/0000:05:00.0/vendor")

    result = discover(Root(str(root)))

    assert not result["ok"]
    reasons = {(error["source"], error["reason"]) for error in result["errors"]}
    assert ("drm", "dangling link") in reasons
    assert ("pci", "dangling link") in reasons
