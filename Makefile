# Two commands for a fresh machine with Python 3.10+:
#   make lab    create .venv if missing, install the course with [dev], open it in JupyterLab
#   make test   create .venv if missing, install the course with [dev], run the whole test suite
PYTHON ?= python3
TORCH ?= torch==2.13.0
VENV := .venv
LAB_ARGS ?=
BIN := $(VENV)/bin

.PHONY: lab test test-fast test-floors lint notebooks bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# torch is installed first and pinned here so that pip does not pick a multi-GB build for a range;
# pyproject.toml itself accepts any torch 2.x from 2.4, so Colab and GPU users keep theirs.
# One environment for lab and test, [dev] included: a learner may run the tests on their copy too, and
# neither target reinstalls what the other installed.
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q "$(TORCH)"
	$(BIN)/python -m pip install -q -e ".[dev]"
	touch $@

# jupyter refuses to start as root without --allow-root (containers, CI); other users never need it
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)

# The repository root is Lab's root (practice/ shows in its file browser), notebook 00 opens first, and the
# course's .venv is active in Lab's kernels and terminals, so `python practice/judge.py 127` in a Lab
# terminal runs the course's python. Terminals start bash with an rc file that reads ~/.bashrc and then
# activates .venv (a login shell would put the system's python back in front).
LAB_RC := $(VENV)/lab_bashrc
lab: $(VENV)/.installed
	printf '[ -f ~/.bashrc ] && . ~/.bashrc\n. "%s/bin/activate"\n' "$(abspath $(VENV))" > $(LAB_RC)
	PATH="$(abspath $(BIN)):$$PATH" VIRTUAL_ENV="$(abspath $(VENV))" \
		$(BIN)/jupyter lab $(ROOT_FLAG) --ServerApp.root_dir="$(CURDIR)" \
		--ServerApp.terminado_settings='{"shell_command": ["bash", "--rcfile", "$(abspath $(LAB_RC))", "-i"]}' \
		$(LAB_ARGS) notebooks/00_start_here.ipynb

# pytest-xdist: TEST_JOBS workers (the CPUs, at most 4), each test file on one worker, so that a notebook's
# cells share one kernel and a file's fixtures one process; on CI's two cores 34 min become 24. TEST_JOBS=0
# runs the suite in one process.
TEST_JOBS ?= $(shell n=$$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1); echo $$(( n < 4 ? n : 4 )))
test: $(VENV)/.installed
	$(BIN)/python -m pytest -n $(TEST_JOBS) --dist loadfile

# everything but the tests marked slow (the notebooks through nbval, the browser, the sandbox, the planted bugs,
# two-process runs, scratch copies of the repository): a couple of minutes on two cores
test-fast: $(VENV)/.installed
	$(BIN)/python -m pytest -m "not slow and not browser" tests

# the oldest triton and numpy that pyproject.toml accepts, in .venv-floors: the Triton tests, judges, notebooks
test-floors:
	PYTHON=$(PYTHON) bash .ci/floors

lint: $(VENV)/.installed
	$(BIN)/ruff check .

notebooks: $(VENV)/.installed
	$(BIN)/python notebooks/build.py

bench: $(VENV)/.installed
	$(BIN)/python benchmarks/bench_judge.py
	$(BIN)/python benchmarks/bench_notebooks.py

clean:
	rm -rf $(VENV) .venv-floors *.egg-info
