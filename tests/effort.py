"""How many examples a property test tries.

Each property names the number it needs to be thorough, ``examples(300)``. The fast suite runs a
third of it (never fewer than 50): enough for the generators to reach every branch they reach at
full size in these tests, at a third of the time. ``SPURINV_HYPOTHESIS=thorough`` runs the full
number, as the mutation runs and a release check do (README.md, Development).
"""

from __future__ import annotations

import os

THOROUGH = os.environ.get("SPURINV_HYPOTHESIS", "") == "thorough"


def examples(thorough: int) -> int:
    """``thorough`` under ``SPURINV_HYPOTHESIS=thorough``, else a third of it, at least 50 (or all)."""
    return thorough if THOROUGH else min(thorough, max(50, thorough // 3))
