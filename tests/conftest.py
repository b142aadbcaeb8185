"Shared test settings: hypothesis runs derandomized (reproducible in CI) and counts the cases it tried."
import os
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

def pytest_sessionfinish(session):
    "Under pytest-xdist a worker hands its tally to the controller, which prints the sum"
    out = getattr(session.config, 'workeroutput', None)
    if out is not None: out['cases'] = dict(CASES)

def pytest_testnodedown(node, error):
    for k, v in getattr(node, 'workeroutput', {}).get('cases', {}).items(): CASES[k] = CASES.get(k, 0) + v

def pytest_terminal_summary(terminalreporter):
    if CASES:
        terminalreporter.write_line(f"property cases tried: {sum(CASES.values())} ({', '.join(f'{k}: {v}' for k, v in sorted(CASES.items()))})")
