"""The commands: the lean entry point, the timer's tick, the typer app, rendering, preflight."""
