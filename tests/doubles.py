"""Test doubles as real executables that cost little to start.

A double written in Python (tests/spurstandin.py, tests/scontrolfake_main.py) is a real
executable, so that the kernel execs it as it execs the program it stands in for (an argument
too long for exec fails as it would). Each call pays the interpreter's start, about 10 ms of CPU
with ``-S``; :func:`program` keeps the rest of it small: the interpreter is the program's own
``#!`` line (no shell in between) and the double is imported as a module whose bytecode
:func:`checked_bytecode` wrote, not a script compiled from its source on every call (a
``__main__`` script is never cached, and nothing is where PYTHONDONTWRITEBYTECODE is set).
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import py_compile
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def checked_bytecode(source: Path) -> None:
    """Write ``source``'s bytecode beside it unless it is there and current.

    The bytecode is checked against a hash of its source at each import, not the file's mtime:
    ``scripts/mutate`` rewrites files in place between runs, and an edit of the same size in the
    same second must never load its predecessor's bytecode. Where it cannot be written (a
    read-only checkout), the module is compiled at each import, as without it."""
    pyc = Path(importlib.util.cache_from_source(str(source)))
    try:
        header, code = pyc.read_bytes()[:16], source.read_bytes()
    except OSError:
        header, code = b"", b""
    # PEP 552: the magic number, flags 0b11 (hash-based, checked), the source's hash
    if header == importlib.util.MAGIC_NUMBER + (0b11).to_bytes(4, "little") + importlib.util.source_hash(code):
        return
    with contextlib.suppress(OSError, py_compile.PyCompileError):
        checked = py_compile.PycInvalidationMode.CHECKED_HASH
        py_compile.compile(str(source), str(pyc), doraise=True, invalidation_mode=checked)


@functools.cache
def _compiled(module: str) -> None:
    """Each double's bytecode checked once per process (every worker may find it stale)."""
    checked_bytecode(TESTS / f"{module}.py")


def program(path: Path, module: str, *leading: str) -> Path:
    """Make ``path`` an executable that calls ``module.main(argv)`` (a module of tests/, standard
    library only) with ``argv`` = its own name, ``leading``, then the arguments it was given."""
    for name in (module, "jsonlite"):  # jsonlite: what the doubles read and write JSON with
        _compiled(name)
    # -S: the doubles need only the standard library, and site-packages cost a third of the start;
    # tests/ last on the path, so that no test module can shadow one of the standard library
    path.write_text(
        f"#!{sys.executable} -S\nimport sys\nsys.path.append({str(TESTS)!r})\nimport {module}\n"
        f"{module}.main([sys.argv[0], *{list(leading)!r}, *sys.argv[1:]])\n"
    )
    path.chmod(0o755)
    return path
