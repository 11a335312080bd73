# The README's two commands: `make demo` and `make test`. Each sets up .venv on first use.
# torch==2.13.0 is installed before the project: a bare torch requirement in a fresh venv
# pulls a multi-GB CUDA build, while this pin takes the CPU build.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt

.PHONY: demo test bench docs lint clean lerobot-env browser

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.core: $(BIN)/python pyproject.toml constraints.txt
	$(PIP) torch==2.13.0
	$(PIP) -e .
	touch $@

$(VENV)/.dev: $(VENV)/.core
	$(PIP) -e '.[dev,ray,test-envs,envpool]'
	touch $@

$(VENV)/.bench: $(VENV)/.core
	$(PIP) -e '.[bench,envpool]'
	touch $@

$(VENV)/.docs: $(VENV)/.core
	$(PIP) -e '.[docs]'
	touch $@

demo: $(VENV)/.core
	$(BIN)/expcli collect CartPole-v1 --envs 16 --seed 0 --output runs/cartpole.h5 --overwrite
	$(BIN)/expcli inspect runs/cartpole.h5

# A worker per core (at most 4), each running whole test files (module fixtures, such as a
# Ray cluster, are set up once), handed out with the files of slow tests first
# (tests/conftest.py), so that no worker is left running a long file alone at the end.
# LeRobot's environment is built first when it can be (tests/lerobot_env runs its check
# there); when it cannot, the build's output is kept in .venv-lerobot.log and the check is
# skipped with its last line as the reason. With both venvs built, the run took 12 min 28 s
# to 12 min 56 s on a quiet 2-core VM (four runs, 2026-11-29).
test: $(VENV)/.dev
	@$(MAKE) --no-print-directory lerobot-env > $(LEROBOT_VENV).log 2>&1 \
		|| echo "make test: LeRobot's environment could not be built (see $(LEROBOT_VENV).log)"
	@$(MAKE) --no-print-directory browser
	$(BIN)/python -m pytest -n auto --maxprocesses 4 --dist loadfile --no-loadscope-reorder

bench: $(VENV)/.bench
	$(BIN)/python benchmarks/memory.py
	$(BIN)/python benchmarks/parallel_env.py
	$(BIN)/python benchmarks/collect.py
	$(BIN)/python benchmarks/convert.py
	$(BIN)/python benchmarks/inspect_dataset.py
	$(BIN)/python benchmarks/sampling.py

# The docs site (mkdocs.yml, docs/) into site/. --strict: a warning (a broken link, a page
# left out of the nav, a docstring mkdocstrings cannot read) fails the build. Material's
# notice about MkDocs 2.0 is not a warning of the build; NO_MKDOCS_2_WARNING keeps it quiet.
docs: $(VENV)/.docs
	NO_MKDOCS_2_WARNING=1 $(BIN)/python -m mkdocs build --strict --site-dir site

# LeRobot's own environment for tests/lerobot_env. LeRobot 0.4.4 needs datasets<5 and .venv
# holds datasets 5, so it cannot share .venv. Built once: 6 min 18 s and 5.9 GB (most of it a
# CUDA build of torch) on a 2-core VM under a load average of 10, 2026-11-29.
LEROBOT_VENV ?= .venv-lerobot

lerobot-env: $(LEROBOT_VENV)/.built

$(LEROBOT_VENV)/.built: tests/lerobot_env/requirements.txt
	python3.11 -m venv $(LEROBOT_VENV)
	$(LEROBOT_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r $<
	$(LEROBOT_VENV)/bin/python -m pip install --quiet --disable-pip-version-check --no-deps lerobot==0.4.4
	touch $@

# The report's browser tests (tests/report/test_browser.py) drive a Chromium through
# playwright (the dev extra): Debian's `chromium`, installed here when it is missing and
# this runs as root (as CI does), in about a minute; where it cannot be, those tests are
# skipped and say why, and the rest runs.
browser:
	@command -v chromium > /dev/null 2>&1 || command -v chromium-browser > /dev/null 2>&1 \
		|| { [ "$$(id -u)" = 0 ] && command -v apt-get > /dev/null 2>&1 \
			&& { apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
				apt-get install -y -qq --no-install-recommends chromium; } > .chromium.log 2>&1; } \
		|| echo "make test: Chromium could not be installed (see .chromium.log): the browser tests are skipped"

lint: $(VENV)/.dev
	$(BIN)/ruff check expcli tests benchmarks examples scripts
	$(BIN)/mypy

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
