"""What CDI specs cost to read: a refused alias bomb and the largest spec accepted.

Discovery reads every CDI spec under ``etc/cdi``, ``var/run/cdi`` and ``discovery.cdi_dirs``.
A YAML spec with an alias is refused (an anchor reused 2,000 times expanded to 385 MB),
but PyYAML's pure-Python parser reads the whole anchor before it meets the alias. Measured here,
CPU seconds in this process (``time.process_time``), each the best of ``--runs``:

* a 0.5 MB alias bomb (one anchor of 17,500 device nodes used 2,000 times), refused, by the
  pure-Python loader (``_loader()``, what spurinv used before and still uses without libyaml)
  and by the libyaml path (``_load_yaml``: the C parser's events, refused at the first alias);
* the largest spec accepted (``cdi.MAX_SPEC``, 1 MiB of devices without aliases), both ways;
* the most one run reads: ``cdi.MAX_SPECS`` specs and ``cdi.MAX_SPEC_BYTES`` in all, through
  :func:`spurinv.inventory.sources.cdi.read_cdi` (the libyaml path).

``.venv/bin/python -m bench.cdi [--runs N]`` prints the table; ``bench/run`` includes it.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench.measure import Row, Stats, table


def alias_bomb(uses: int = 2000, nodes: int = 17500) -> str:
    """An anchor of ``nodes`` device nodes reused ``uses`` times (about 0.5 MB by default)."""
    paths = ", ".join(f"{{path: /dev/fpga{i}}}" for i in range(nodes))
    devices = "".join(f"- name: d{i}\n  containerEdits: {{deviceNodes: *n}}\n" for i in range(uses))
    return f'cdiVersion: "0.6.0"\nkind: example.com/fpga\nx-nodes: &n [{paths}]\ndevices:\n{devices}'


def large_spec(limit: int) -> str:
    """A YAML spec without aliases just under ``limit`` bytes: devices with two device nodes each."""
    head = 'cdiVersion: "0.6.0"\nkind: example.com/fpga\ndevices:\n'
    parts = [head]
    size = len(head)
    index = 0
    while True:
        device = (
            f"- name: d{index}\n  containerEdits:\n    deviceNodes:\n"
            f"    - path: /dev/dri/card{index}\n      type: c\n      major: 226\n      minor: {index % 256}\n"
            f"    - path: /dev/dri/renderD{128 + index}\n      type: c\n      major: 226\n      minor: {index % 256}\n"
        )
        if size + len(device) > limit:
            return "".join(parts)
        parts.append(device)
        size += len(device)
        index += 1


def _best(runs: int, work: Callable[[], object]) -> Stats:
    seconds = []
    for _ in range(runs):
        started = time.process_time()
        work()
        seconds.append(time.process_time() - started)
    return Stats.of(seconds)


def _refused(load: Callable[[str], object], text: str) -> Callable[[], object]:
    from spurinv.inventory.sources import cdispec

    def run() -> object:
        try:
            load(text)
        except cdispec._AliasRefused:
            return None
        raise AssertionError("the alias bomb was not refused")

    return run


def measure(runs: int) -> tuple[list[Row], list[str]]:
    import yaml

    from spurinv.inventory.root import Root
    from spurinv.inventory.sources import cdi, cdispec
    from spurinv.inventory.sources.status import Report

    def pure(text: str) -> object:
        return yaml.load(text, Loader=cdispec._loader())  # noqa: S506  (SafeLoader refusing aliases)

    bomb = alias_bomb()
    spec = large_spec(cdi.MAX_SPEC)
    notes = [f"cdi: the alias bomb is {len(bomb) / 1e6:.2f} MB, the largest spec {len(spec) / 2**20:.2f} MiB"]
    rows = [
        Row("refused 0.5 MB alias bomb, pure-Python loader (before)", "s", _best(runs, _refused(pure, bomb))),
    ]
    if getattr(yaml, "CSafeLoader", None) is None:
        notes.append("cdi: PyYAML has no libyaml here: spurinv uses the pure-Python loader")
        return rows, notes
    rows.append(Row("refused 0.5 MB alias bomb, libyaml events (after)", "s", _best(runs, _refused(cdispec._load_yaml, bomb))))
    rows.append(Row("1 MiB spec, pure-Python loader (before)", "s", _best(1, lambda: pure(spec))))
    rows.append(Row("1 MiB spec, libyaml (after)", "s", _best(runs, lambda: cdispec._load_yaml(spec))))
    with tempfile.TemporaryDirectory(prefix="spurinv-cdi-") as work:
        directory = Path(work, "etc", "cdi")
        directory.mkdir(parents=True)
        size = cdi.MAX_SPEC_BYTES // cdi.MAX_SPECS
        for index in range(cdi.MAX_SPECS + 8):
            text = large_spec(size).replace("kind: example.com/fpga", f"kind: example.com/fpga{index}")
            (directory / f"spec{index:03d}.yaml").write_text(text)
        report = Report("cdi")
        found: list[object] = []
        rows.append(Row(f"read_cdi: {cdi.MAX_SPECS + 8} specs of {size >> 10} KiB, past the bound of a run", "s",
                        _best(runs, lambda: found.extend(cdi.read_cdi(Root(work), report)))))  # fmt: skip
        said = report.flags[0]["reason"] if report.flags else "-"
        notes.append(f"cdi: read_cdi flagged {len(report.flags) // runs} spec(s) a run: {said}")
    return rows, notes


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.cdi", description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="runs per figure (default 3)")
    args = parser.parse_args(argv)
    rows, notes = measure(args.runs)
    print(table([("CDI specs, CPU seconds in one process", rows)]))
    for note in notes:
        print(f"- {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
