"""Slurm's hostlist syntax (stdlib, pure): ``a[01-03,7],b`` is a list of expressions joined by
commas outside brackets. Both gres.conf's ``NodeName=`` (:mod:`spurinv.slurmdynamic`) and our
``File=`` ranges (:mod:`spurinv.inventory.slurmconf`) are read with it."""

from __future__ import annotations


def split(text: str) -> list[str]:
    """The expressions of a hostlist, split at the commas outside ``[…]``, as written (empty
    ones kept): ``d[1-4,7],e`` → ``["d[1-4,7]", "e"]``."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(text):
        depth += (c == "[") - (c == "]")
        if c == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts
