"""The one node-name rule (stdlib, no I/O): what ``node.name``, ``--node``, the host name and the
``scontrol`` transport accept.

A node name goes into the controller's URL path and onto ``scontrol``'s command line: letters,
digits, "-", "_" and ".", at most 64, not starting with "-" or "." (`../../admin/x?y=1#` steered
the request elsewhere; a leading "-" reads as an option).
"""

from __future__ import annotations

import re

_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")
RULE = 'letters, digits, "-", "_" and "." only, at most 64, not starting with "-" or "."'


def valid(name: str) -> bool:
    """Is ``name`` a node name by the rule above?"""
    return _NAME.fullmatch(name) is not None


def every_node(name: str) -> bool:
    """Does ``scontrol`` (Slurm's and spur's) read ``name`` as every node? ``ALL``, in any case."""
    return name.upper() == "ALL"
