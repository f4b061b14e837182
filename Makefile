# The two commands of the README's quick start: `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# torch==2.13.0 is a local CPU wheel on the project's machines; GPU hosts keep their CUDA torch (>=2.4).
TORCH_SPEC ?= torch==2.13.0
STAMP := $(VENV)/.installed
# pins the torch the venv already has while extras install (mjlab would otherwise pull a CUDA torch)
CONSTRAINTS := $(VENV)/torch-constraints.txt

.PHONY: venv run test test-slow test-gpu lint plan doctor bench clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q "$(TORCH_SPEC)"
	$(PY) -c "import torch; print('torch==' + torch.__version__)" > $(CONSTRAINTS)
	$(PY) -m pip install -q -c $(CONSTRAINTS) -e ".[test,mjlab]"
	touch $(STAMP)

run: venv
	$(PY) -m gmiexp

test: venv
	$(PY) -m pytest -q; rc=$$?; if [ $$rc -eq 5 ]; then echo "no tests collected"; exit 0; fi; exit $$rc

test-slow: venv
	$(PY) -m pytest -q -m slow

test-gpu: venv
	$(PY) -m pytest -q -m gpu

lint: venv
	$(PY) -m ruff check src tests experiments

clean:
	rm -rf $(VENV) outputs multirun
