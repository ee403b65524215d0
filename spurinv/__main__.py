"""``python -m spurinv``: the same lean entry point as the console script."""

from spurinv.cli.launch import main

raise SystemExit(main())
