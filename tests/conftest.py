"Shared test settings: hypothesis runs derandomized (reproducible in CI) and counts the cases it tried."
import os
import pytest
from hypothesis import settings, HealthCheck
import torch

settings.register_profile('ci', derandomize=True, deadline=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile(os.environ.get('HYPOTHESIS_PROFILE', 'ci'))
# One torch thread per pytest-xdist worker (`make test` runs two on two cores); two threads in a plain run.
torch.set_num_threads(1 if os.environ.get('PYTEST_XDIST_WORKER') else max(1, min(2, os.cpu_count() or 1)))

CASES = {}

def tally(name):
    "Count one hypothesis case under `name` (printed at the end of the session)"
    CASES[name] = CASES.get(name, 0) + 1

DONE = set()   # names of the tests that finished in this process (a worker hands them to the controller with its tally)
FUZZ_MIN = {}  # set by tests/test_fuzz.py: {'min': generated bad inputs wanted per run, 'tests': the generated tests}

def pytest_runtest_logfinish(nodeid, location):
    DONE.add(nodeid.split('::')[-1].split('[')[0].split('@')[0])

def pytest_sessionfinish(session):
    """Under pytest-xdist a worker hands its tally (and the tests it ran) to the controller, which prints the sum. Where the
    whole tally is known (the controller, or a plain run), the session fails when every generated fuzz test ran and the
    bad inputs they refused are fewer than wanted: the fuzz tests may run in any order, so no test of theirs can see it"""
    out = getattr(session.config, 'workeroutput', None)
    if out is not None: out['cases'], out['done'], out['fuzz_min'] = dict(CASES), sorted(DONE), dict(FUZZ_MIN); return
    if FUZZ_MIN and set(FUZZ_MIN['tests']) <= DONE:
        n = sum(v for k, v in CASES.items() if k.startswith('fuzz-'))
        if n < FUZZ_MIN['min']:
            session.config.get_terminal_writer().line(f"fuzz: only {n} generated bad inputs (want >= {FUZZ_MIN['min']})", red=True)
            session.exitstatus = 1

def pytest_testnodedown(node, error):
    out = getattr(node, 'workeroutput', {})
    for k, v in out.get('cases', {}).items(): CASES[k] = CASES.get(k, 0) + v
    DONE.update(out.get('done', [])); FUZZ_MIN.update(out.get('fuzz_min', {}))

def pytest_terminal_summary(terminalreporter):
    if CASES:
        terminalreporter.write_line(f"property cases tried: {sum(CASES.values())} ({', '.join(f'{k}: {v}' for k, v in sorted(CASES.items()))})")

def pytest_addoption(parser):
    parser.addoption('--slow', action='store_true', help='also run the tests marked slow (a minute or more each: `make test-slow`)')

def pytest_configure(config):
    config.addinivalue_line('markers', 'slow: a minute or more each; skipped unless --slow (`make test-slow`), as nbdev_test skips #| slow cells')

def pytest_collection_modifyitems(config, items):
    if config.getoption('--slow'): return
    skip = pytest.mark.skip(reason='slow: run with --slow (make test-slow)')
    for item in items:
        if 'slow' in item.keywords: item.add_marker(skip)
