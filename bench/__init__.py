"""spurinv's benchmark (bench/README.md): ``bench/run`` builds the roots, measures, prints one table.

Modules: :mod:`bench.roots` (fixture roots from ``tests/rootbuilder.py``, including the
transient states of a driver reload), :mod:`bench.measure` (whole-process timing and peak RSS),
:mod:`bench.figures` (the per-node figures and their budgets), :mod:`bench.fleet` (the fleet
simulation through the real convergence code, and its end-to-end version against a local
gateway), :mod:`bench.main` (options and the table). See ``bench/README.md``.
"""
