"""The scheduler ``tests/conftest.py`` gives pytest-xdist: the e2e tests as one unit on one worker,
every other test its own unit, each worker kept four tests ahead (with two it idled after each test
until the controller answered), every test sent once, and the run ended when all are done.

It replaces parts of xdist's ``LoadScopeScheduling``: driven here as xdist's controller drives it
(``add_node``, ``add_node_collection``, ``schedule``, ``mark_test_complete``), with workers that
record what they are sent, so that an xdist upgrade that changes those parts fails here."""

from __future__ import annotations

from collections import deque
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

E2E = [f"tests/e2e/test_lab.py::test_{i}" for i in range(5)]
OTHERS = [f"tests/test_m{i // 7}.py::test_{i}" for i in range(40)]


class Worker:
    def __init__(self, name: str) -> None:
        self.gateway = SimpleNamespace(id=name)
        self.shutting_down = False
        self.sent: deque[int] = deque()  # sent, not yet reported done
        self.ran: list[int] = []

    def send_runtest_some(self, indices: list[int]) -> None:
        self.sent.extend(indices)

    def shutdown(self) -> None:
        self.shutting_down = True


def scheduler(request: pytest.FixtureRequest, workers: int) -> Any:
    conftest = next(
        plugin
        for plugin in request.config.pluginmanager.get_plugins()
        if getattr(plugin, "__file__", None) == str(Path(__file__).with_name("conftest.py"))
    )
    config = SimpleNamespace(
        getoption=lambda name: {"dist": "load"}[name],
        getvalue=lambda name: {"tx": [f"{workers}*popen"]}[name],
        option=SimpleNamespace(loadscopereorder=True),
    )
    return conftest.pytest_xdist_make_scheduler(config=config, log=SimpleNamespace(loadscopesched=lambda *args: None))


@pytest.mark.parametrize("count", [1, 2, 4])
def test_every_test_runs_once_four_ahead_and_the_e2e_unit_on_one_worker(request, count):
    collection = OTHERS[:20] + E2E + OTHERS[20:]
    sched = scheduler(request, count)
    workers = [Worker(f"gw{i}") for i in range(count)]
    for worker in workers:
        sched.add_node(worker)
        sched.add_node_collection(worker, collection)
    sched.schedule()

    for _ in range(len(collection)):  # a test done each round at least: never more rounds
        busy = [worker for worker in workers if worker.sent]
        if not busy:
            break
        for worker in busy:
            # a worker holds four (or what is left) unless it runs the e2e unit, sent whole
            assert len(worker.sent) >= min(4, sum(not done for unit in sched.workqueue.values() for done in unit.values()))
            index = worker.sent.popleft()
            worker.ran.append(index)
            sched.mark_test_complete(worker, index)

    assert sched.tests_finished
    ran = sorted(collection[index] for worker in workers for index in worker.ran)
    assert ran == sorted(collection)  # each test once
    assert [sum(collection[i] in E2E for i in worker.ran) for worker in workers].count(len(E2E)) == 1
    assert all(worker.shutting_down and not worker.sent for worker in workers)
    assert not sched.has_pending


def test_a_worker_is_sent_four_tests_before_it_reports_one(request):
    sched = scheduler(request, 2)
    workers = [Worker("gw0"), Worker("gw1")]
    for worker in workers:
        sched.add_node(worker)
        sched.add_node_collection(worker, OTHERS)
    sched.schedule()

    assert [len(worker.sent) for worker in workers] == [4, 4]
    first = workers[0].sent.popleft()
    sched.mark_test_complete(workers[0], first)
    assert len(workers[0].sent) == 4  # one more: the worker never waits for the next
