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
UNGROUPED = []  # the reason a worker ran nothing: pytest-xdist did not group the tests marked xdist_group (pytest_collection_finish)

def pytest_runtest_logfinish(nodeid, location):
    DONE.add(nodeid.split('::')[-1].split('[')[0].split('@')[0])

def pytest_sessionfinish(session):
    """Under pytest-xdist a worker hands its tally (and the tests it ran) to the controller, which prints the sum. Where the
    whole tally is known (the controller, or a plain run), the session fails when every generated fuzz test ran and the
    bad inputs they refused are fewer than wanted: the fuzz tests may run in any order, so no test of theirs can see it"""
    out = getattr(session.config, 'workeroutput', None)
    if out is not None: out['cases'], out['done'], out['fuzz_min'] = dict(CASES), sorted(DONE), dict(FUZZ_MIN); return
    if UNGROUPED:
        session.config.get_terminal_writer().line(UNGROUPED[0], red=True)
        session.exitstatus = pytest.ExitCode.USAGE_ERROR
        return
    if FUZZ_MIN and set(FUZZ_MIN['tests']) <= DONE:
        n = sum(v for k, v in CASES.items() if k.startswith('fuzz-'))
        if n < FUZZ_MIN['min']:
            session.config.get_terminal_writer().line(f"fuzz: only {n} generated bad inputs (want >= {FUZZ_MIN['min']})", red=True)
            session.exitstatus = 1

def pytest_testnodedown(node, error):
    out = getattr(node, 'workeroutput', {})
    if 'ungrouped' in out: UNGROUPED[:] = [out['ungrouped']]
    for k, v in out.get('cases', {}).items(): CASES[k] = CASES.get(k, 0) + v
    DONE.update(out.get('done', [])); FUZZ_MIN.update(out.get('fuzz_min', {}))

def pytest_terminal_summary(terminalreporter):
    if CASES:
        terminalreporter.write_line(f"property cases tried: {sum(CASES.values())} ({', '.join(f'{k}: {v}' for k, v in sorted(CASES.items()))})")

def pytest_addoption(parser):
    parser.addoption('--slow', action='store_true', help='also run the tests marked slow (a minute or more each: `make test-slow`)')

def pytest_configure(config):
    config.addinivalue_line('markers', 'slow: a minute or more each; skipped unless --slow (`make test-slow`), as nbdev_test skips #| slow cells')

@pytest.hookimpl(tryfirst=True)   # before pytest-xdist hands the controller the worker's collection
def pytest_collection_finish(session):
    """Under `--dist loadgroup` (`make test`) pytest-xdist routes a test marked `xdist_group` by a `@group` suffix it writes into
    the test's node id. Under pytest 9.2 that write no longer takes (pytest-xdist#1386): nothing failed, the groups were spread
    over both workers and each grouped module's costly fixture (the docs site, the reproduce run, the sweeps, the census) was
    built twice. Refuse to run so, naming the fix, rather than run slower without a word: a worker that sees it runs nothing and
    hands the controller the reason (an error raised in a worker reaches the terminal as an INTERNALERROR without its message)"""
    out = getattr(session.config, 'workeroutput', None)
    if out is None or not getattr(session.config.option, 'loadgroup', False): return
    lost = [i.nodeid for i in session.items if i.get_closest_marker('xdist_group') and '@' not in i.nodeid]
    if lost:
        out['ungrouped'] = (f"pytest-xdist did not group {len(lost)} tests marked xdist_group (e.g. {lost[0]}) under pytest "
                            f"{pytest.__version__} (pytest-xdist#1386): install the pytest settings.ini pins (pip install -e '.[dev]')")
        session.items.clear()

def pytest_collection_modifyitems(config, items):
    if config.getoption('--slow'): return
    skip = pytest.mark.skip(reason='slow: run with --slow (make test-slow)')
    for item in items:
        if 'slow' in item.keywords: item.add_marker(skip)
