# Two commands for a fresh machine with Python 3.10+:
#   make lab    create .venv if missing, install the course, open it in JupyterLab
#   make test   create .venv if missing, install the course with [dev], run the whole test suite
PYTHON ?= python3
TORCH ?= torch==2.13.0
VENV := .venv
BIN := $(VENV)/bin

.PHONY: lab test lint notebooks bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# torch is installed first and pinned here so that pip does not pick a multi-GB build for a range;
# pyproject.toml itself accepts any torch 2.x from 2.4, so Colab and GPU users keep theirs.
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q "$(TORCH)"
	$(BIN)/python -m pip install -q -e ".[dev]"
	touch $@

# jupyter refuses to start as root without --allow-root (containers, CI); other users never need it
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)

lab: $(VENV)/.installed
	$(BIN)/jupyter lab $(ROOT_FLAG) notebooks/00_start_here.ipynb

test: $(VENV)/.installed
	$(BIN)/python -m pytest

lint: $(VENV)/.installed
	$(BIN)/ruff check .

notebooks: $(VENV)/.installed
	$(BIN)/python notebooks/build.py

bench: $(VENV)/.installed
	$(BIN)/python benchmarks/bench_judge.py
	$(BIN)/python benchmarks/bench_notebooks.py

clean:
	rm -rf $(VENV) *.egg-info
