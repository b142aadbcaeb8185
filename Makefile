# Two commands a user needs: `make demo` and `make test`. Each creates .venv when missing and installs the package.
# TORCH is pinned here (not in the package, which accepts a range) so these machines take the CPU wheel on disk.
PYTHON ?= python3
TORCH  ?= torch==2.13.0
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test test-slow export clean-nbs readme docs bench bench-monitor bench-census setup browser fashion-mnist reproduce

setup: $(STAMP)

$(STAMP): setup.py settings.ini
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check "$(TORCH)"
	$(BIN)/pip install -q --disable-pip-version-check -e ".[dev]"
	@$(MAKE) --no-print-directory fashion-mnist
	touch $(STAMP)

# Fashion-MNIST for the experiments: the Debian package (gzipped IDX under /usr/share/datasets/fashion-mnist/).
# Installed only when running as root; otherwise says how, and the experiments fall back to scikit-learn's digits.
FASHION_DIR := /usr/share/datasets/fashion-mnist
fashion-mnist:
	@if [ -f $(FASHION_DIR)/train-images-idx3-ubyte.gz ]; then echo "Fashion-MNIST: found in $(FASHION_DIR)"; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  apt-get install -y -q dataset-fashion-mnist || (apt-get update -q && apt-get install -y -q dataset-fashion-mnist) || \
	  echo "Fashion-MNIST: apt-get install dataset-fashion-mnist failed; the experiments will use scikit-learn's digits"; \
	else echo "Fashion-MNIST is not installed. As root run: apt-get install dataset-fashion-mnist (Debian/Ubuntu)."; \
	  echo "Until then the fashion-mnist task falls back to scikit-learn's 8x8 digits (pip install scikit-learn)."; fi

demo: $(STAMP)
	$(BIN)/conslaw demo

# One torch thread per process: nbdev_test runs two notebooks at once, and two processes each spinning two OpenMP
# threads on two cores made the notebook run 8x slower (7.5 min instead of 53 s, measured). pytest likewise runs two
# pytest-xdist workers of one thread each (tests/conftest.py): serially it left one core idle.
# CONSLAW_CACHE=off: the suite keeps nothing between runs and reads nothing a user's runs kept (~/.cache/conslaw_nb); the
# structure-check cache is tested on folders its tests make.
test: $(STAMP) browser
	CONSLAW_CACHE=off OMP_NUM_THREADS=1 $(BIN)/nbdev_test --n_workers 2
	CONSLAW_CACHE=off OMP_NUM_THREADS=1 $(BIN)/python -m pytest -q -n 2 --dist loadgroup tests

# The tests marked slow too (a minute or more each: the census of families from their published configs), and the slow notebook cells
test-slow: $(STAMP) browser
	CONSLAW_CACHE=off OMP_NUM_THREADS=1 $(BIN)/nbdev_test --n_workers 2 --flags slow
	CONSLAW_CACHE=off OMP_NUM_THREADS=1 $(BIN)/python -m pytest -q -n 2 --dist loadgroup tests --slow

export: $(STAMP)
	$(BIN)/nbdev_export
	$(BIN)/nbdev_clean

# Section 6 at its protocol (not part of `make test`): about an hour on 2 idle CPU cores, resumable (run it again after an
# interruption); figures, fit.json, summary.csv and timing.json in runs/reproduce/. ARGS="--protocol quick --out /tmp/q" for a
# one-minute smoke run; ARGS="--protocol gpu --device cuda --data wikitext=DIR cifar10=DIR" at the paper's sizes.
REPRODUCE_THREADS ?= 1
reproduce: $(STAMP)
	OMP_NUM_THREADS=$(REPRODUCE_THREADS) $(BIN)/python tools/reproduce.py $(ARGS)

# Engine speed: table on stdout, results in bench.json (ARGS="--device cuda" on a GPU; ARGS="--quick" for a smoke run).
# Every benchmark is a module of conslaw_nb.bench, run with python -m (each takes --help): cli (this one), monitor, found,
# check, carry; nbs/15c_bench.cli.ipynb lists what each measures.
bench: $(STAMP)
	$(BIN)/python -m conslaw_nb.bench.cli $(ARGS)

# The monitor's cost on a ~100M-parameter transformers LM: its build cold and warm, and update() beside a training step, each
# measurement in a fresh process; results in bench_monitor.json (ARGS="--pairs 1 --layers 2 --no-profile" for a smoke run)
bench-monitor: $(STAMP)
	$(BIN)/python -m conslaw_nb.bench.monitor $(ARGS)

# How fast the census answers (issue 52): `conslaw --help`, a family never seen, a 7-8B config of a family seen before, and the
# census from the cache, each in a fresh process on a cache folder of its own; results in bench_census.json
# (ARGS="--new gpt2-xl --seen gpt2" for two other configs of one family)
bench-census: $(STAMP)
	$(BIN)/python -m conslaw_nb.bench.census $(ARGS)

readme: $(STAMP)
	$(BIN)/python tools/readme.py nbs/index.ipynb README.md

# Re-run notebooks so their stored outputs are current, then clean them and regenerate the README
outputs: $(STAMP)
	$(BIN)/python tools/run_nbs.py $(or $(NB),nbs/*.ipynb nbs/explain/*.ipynb)
	$(BIN)/nbdev_clean
	$(BIN)/python tools/readme.py nbs/index.ipynb README.md

# The docs site, offline: nbdev's processors on copies of the notebooks, MkDocs Material, bundled MathJax (tools/docs/).
# Serve it with `python -m http.server -d docs`. Where Quarto is installed, `nbdev_docs` builds the Quarto site instead.
docs: $(STAMP)
	OMP_NUM_THREADS=1 $(BIN)/python tools/docs/build.py --nbs nbs --out docs

# Headless Chromium for the docs browser test (tests/test_docs.py): installed from Debian when missing and run as root
browser:
	@if ! command -v chromium >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium; \
	  else echo "chromium is missing and this is not root: the docs browser test will be skipped"; fi; \
	fi
