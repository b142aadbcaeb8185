"""The engine's benchmark: `cases` (what is timed, against baselines run in the same process) and `run` (the runner that
`tools/bench.py` drives from the command line)."""
__all__ = []
