"""``discover --format slurm``'s gres.conf lines: File= ranges an operator pastes."""

from __future__ import annotations

import itertools

import pytest
from factories import inventory, packages
from hypothesis import given
from hypothesis import strategies as st

from spurinv.inventory.slurmconf import compress, expand, expand_all, gres, gres_conf, logical_cores

prefixes = st.sampled_from(["/dev/dri/renderD", "/dev/nvidia", "/dev/accel/accel", "/lab/gpu", "/dev/x"])
numbers = st.integers(0, 300)


@given(st.lists(st.tuples(prefixes, numbers, st.booleans()), max_size=80))
def test_compressed_paths_expand_to_exactly_the_paths(items):
    """Every path once, none added, whatever the order, gaps, duplicates or zero padding."""
    paths = [f"{prefix}{number:03d}" if padded else f"{prefix}{number}" for prefix, number, padded in items]

    expressions = compress(paths)

    assert sorted(p for e in expressions for p in expand(e)) == sorted(set(paths))
    assert len(expressions) <= len(set(paths))
    assert sorted(expand_all(",".join(expressions))) == sorted(set(paths))  # as File= carries them


@given(st.sets(numbers, min_size=1, max_size=80))
def test_one_prefix_is_one_expression_with_one_run_per_gap(numbers_seen):
    ordered = sorted(numbers_seen)
    gaps = sum(1 for a, b in itertools.pairwise(ordered) if b != a + 1)

    (expression,) = compress(f"/dev/dri/renderD{n}" for n in numbers_seen)

    assert expression.count(",") == gaps
    if len(ordered) > 1:
        assert expression.startswith("/dev/dri/renderD[")
        assert expression.endswith("]")


def test_the_usual_ranges():
    assert ["/dev/dri/renderD[128-135]"] == compress(f"/dev/dri/renderD{128 + i}" for i in range(8))
    assert ["/dev/dri/renderD[128-129,131]"] == compress(["/dev/dri/renderD131", "/dev/dri/renderD128", "/dev/dri/renderD129"])
    assert ["/dev/nvidia0"] == compress(["/dev/nvidia0"])
    # a zero-padded run keeps its width (hostlist reads the width from the low bound)
    assert ["/lab/gpu[07-09]", "/lab/gpu10"] == compress(["/lab/gpu07", "/lab/gpu08", "/lab/gpu09", "/lab/gpu10"])
    assert ["/odd[1]"] == compress(["/odd[1]"])  # a bracket of its own: left alone


def test_one_line_per_model_and_numa_node_with_that_nodes_cores():
    cpx = inventory(packages(8, "CPX", per=8))

    lines = gres_conf(cpx, "n1", {0: "0-95", 1: "96-191"})

    assert "gpu:mi300x:64" == gres(cpx)
    assert len(lines) == len({(d["model"], d["numa_node"]) for d in cpx["devices"]})
    files = [p for line in lines for p in expand(line.split("File=")[1].split()[0])]
    assert sorted(files) == sorted({d["device_node"] for d in cpx["devices"] if d["device_node"]})


@given(
    st.integers(1, 4),
    st.integers(1, 16),
    st.integers(1, 4),
    st.randoms(use_true_random=False),
)
def test_cores_are_logical_indices_numbered_socket_by_socket(sockets, cores, threads, rng):
    """Whatever the CPU ids (SMT siblings far apart, shuffled, sparse core ids), every core gets
    exactly one index, socket 0's cores come first, and a NUMA node's Cores= names exactly the
    indices of its CPUs' cores (the CPU list was pasted)."""
    ids = list(range(sockets * cores * threads))
    rng.shuffle(ids)
    topology, expected = {}, {}
    it = iter(ids)
    for package in range(sockets):
        for core in range(cores):
            for _ in range(threads):
                cpu = next(it)
                topology[cpu] = (package, core * 3 + 1)  # sparse core ids
                expected[cpu] = package * cores + core
    numa = {package: [cpu for cpu in topology if topology[cpu][0] == package] for package in range(sockets)}

    result = logical_cores(numa, topology)

    assert result is not None
    for package in range(sockets):
        assert result[package] == (f"{package * cores}-{package * cores + cores - 1}" if cores > 1 else f"{package}")
        assert set().union(*(expand_cores(part) for part in result[package].split(","))) == {expected[c] for c in numa[package]}


def expand_cores(part: str) -> set[int]:
    low, _, high = part.partition("-")
    return set(range(int(low), int(high or low) + 1))


def test_a_cpu_without_topology_gives_no_cores():
    assert logical_cores({0: [0, 1]}, {0: (0, 0)}) is None


@given(st.integers(1, 2), st.integers(1, 3), st.integers(1, 4), st.integers(1, 2), st.booleans())
def test_a_core_id_repeated_across_dies_is_still_one_core_per_sibling_set(sockets, dies, cores, threads, interleave):
    """core_id counts within a die (AMD CCDs, Intel clusters): keyed by sibling set, every core
    gets its own logical index, numbered socket by socket."""
    topology, siblings, die_of, layout = {}, {}, {}, []
    total = sockets * dies * cores
    for n in range(total):
        package, die, core = n // (dies * cores), (n // cores) % dies, n % cores
        cpus = [n + t * total for t in range(threads)] if interleave else [n * threads + t for t in range(threads)]
        layout.append(cpus)
        for cpu in cpus:
            topology[cpu], siblings[cpu], die_of[cpu] = (package, core), frozenset(cpus), die
    numa = {package: [c for c in topology if topology[c][0] == package] for package in range(sockets)}

    result = logical_cores(numa, topology, siblings, die_of)

    assert result is not None
    seen = [set().union(*(expand_cores(part) for part in result[package].split(","))) for package in range(sockets)]
    assert sum(len(s) for s in seen) == total  # no two cores collapsed into one index
    assert all(max(seen[p]) < min(seen[p + 1]) for p in range(sockets - 1))


def test_non_siblings_sharing_a_core_id_in_one_die_give_no_cores():
    topology = {0: (0, 0), 1: (0, 0)}
    siblings = {0: frozenset({0}), 1: frozenset({1})}
    assert logical_cores({0: [0, 1]}, topology, siblings) is None
    assert logical_cores({0: [0, 1]}, topology, {0: frozenset({0, 1}), 1: frozenset({1})}) is None  # disagree


def test_without_siblings_core_ids_are_keyed_as_before():
    assert logical_cores({0: [0, 1, 2, 3]}, {0: (0, 0), 1: (0, 1), 2: (0, 0), 3: (0, 1)}) == {0: "0-1"}


def test_cores_of_two_dies_that_repeat_core_ids_are_told_apart_by_the_node(tmp_path):
    """``read_numa_cores`` hands the sibling lists and dies to ``logical_cores``: core_id 0 and 1
    on each of two dies of one package are four cores, not two."""
    from spurinv.inventory.root import Root
    from spurinv.inventory.sources.host import read_numa_cores

    for node, cpus in ((0, "0-1"), (1, "2-3")):
        (tmp_path / f"sys/devices/system/node/node{node}").mkdir(parents=True)
        (tmp_path / f"sys/devices/system/node/node{node}/cpulist").write_text(cpus + "\n")
    for cpu, (core, die) in enumerate([(0, 0), (1, 0), (0, 1), (1, 1)]):
        where = tmp_path / f"sys/devices/system/cpu/cpu{cpu}/topology"
        where.mkdir(parents=True)
        for name, value in (("physical_package_id", 0), ("core_id", core), ("die_id", die), ("thread_siblings_list", cpu)):
            (where / name).write_text(f"{value}\n")

    cores, why = read_numa_cores(Root(str(tmp_path)))

    assert (cores, why) == ({0: "0-1", 1: "2-3"}, None)


@pytest.mark.parametrize(
    ("kept", "expected"),
    [
        ({"thread_siblings_list", "die_id"}, ({0: "0-1"}, None)),
        ({"thread_siblings_list"}, ({0: "0-1"}, None)),  # no die_id: an older kernel
        (set(), ({0: "0-1"}, None)),  # neither: keyed by core_id as before
    ],
)
def test_a_topology_attribute_an_older_kernel_lacks_is_absent_not_an_error(tmp_path, kept, expected):
    from spurinv.inventory.root import Root
    from spurinv.inventory.sources.host import read_numa_cores

    (tmp_path / "sys/devices/system/node/node0").mkdir(parents=True)
    (tmp_path / "sys/devices/system/node/node0/cpulist").write_text("0-1\n")
    for cpu in (0, 1):
        where = tmp_path / f"sys/devices/system/cpu/cpu{cpu}/topology"
        where.mkdir(parents=True)
        values = {"physical_package_id": 0, "core_id": cpu, "die_id": 0, "thread_siblings_list": cpu}
        for name, value in values.items():
            if name in kept or name in ("physical_package_id", "core_id"):
                (where / name).write_text(f"{value}\n")

    assert read_numa_cores(Root(str(tmp_path))) == expected


def test_a_topology_attribute_that_cannot_be_read_leaves_the_cores_out_naming_it(tmp_path):
    from spurinv.inventory.root import Root
    from spurinv.inventory.sources.host import read_numa_cores

    (tmp_path / "sys/devices/system/node/node0").mkdir(parents=True)
    (tmp_path / "sys/devices/system/node/node0/cpulist").write_text("0\n")
    where = tmp_path / "sys/devices/system/cpu/cpu0/topology"
    where.mkdir(parents=True)
    (where / "physical_package_id").write_text("0\n")
    (where / "core_id").write_text("0\n")
    (where / "die_id").mkdir()  # there, but no attribute

    cores, why = read_numa_cores(Root(str(tmp_path)))

    assert cores == {}
    assert str(why).startswith(f"{where}/die_id: ")
