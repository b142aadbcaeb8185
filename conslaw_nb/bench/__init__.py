"""The benchmarks, one module a measurement, each run from the command line with `python -m conslaw_nb.bench.<module>`:
the engine's speed (`cases`: what is timed, against baselines run in the same process; `anchors`: the anchor suites;
`run`: the summary and the whole run; `cli`: its command line, which `make bench` runs), the monitor at scale (`monitor`,
`make bench-monitor`), the found-law path (`found`), the check at full width and the census (`check`), and laws carried
to published widths (`carry`)."""
__all__ = []
