# The two commands of the README's quick start: `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# torch==2.13.0 is a local CPU wheel on the project's machines; GPU hosts keep their CUDA torch (>=2.4).
TORCH_SPEC ?= torch==2.13.0
STAMP := $(VENV)/.installed
# mjlab's Warp kernels are build products: compiled once into a cache beside the venv (the suite's cache), so no test
# and no pair of GMIs compiles them at once (gmiexp.tools.warp_kernels); the tasks whose kernels the suite steps
WARP_CACHE := $(abspath $(VENV))/warp-cache
WARP_TASKS ?= Mjlab-Cartpole-Balance
# pins the torch the venv already has while extras install (mjlab would otherwise pull a CUDA torch)
CONSTRAINTS := $(VENV)/torch-constraints.txt
# prints the installed torch as a pip pin, read from its metadata: importing torch before numpy is installed prints
# "UserWarning: Failed to initialize NumPy" (a fresh venv); a CUDA build's version (2.5.1+cu124) is kept as is
TORCH_PIN = $(PY) -c 'import importlib.metadata as m; print("torch==" + m.version("torch"))'

.PHONY: venv renderer run test test-slow test-gpu test-slurm test-rslrl-isaaclab gpu-check lint plan doctor bench clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(TORCH_PIN) >/dev/null 2>&1 || $(PY) -m pip install -q "$(TORCH_SPEC)"
	$(TORCH_PIN) > $(CONSTRAINTS)
	$(PY) -m pip install -q -c $(CONSTRAINTS) -e ".[test,mjlab]"
	WARP_CACHE_PATH="$(WARP_CACHE)" $(PY) -m gmiexp.tools.warp_kernels $(WARP_TASKS) 2>$(VENV)/warp-kernels.log \
		|| { tail -20 $(VENV)/warp-kernels.log; exit 1; }
	touch $(STAMP)

# Offscreen GL for mode=eval eval.video (MuJoCo's EGL back-end): Debian packages, installed when missing
# and run as root (CI); otherwise the video test is skipped and says why.
RENDER_PKGS := libegl1 libegl-mesa0 libgl1-mesa-dri
renderer:
	@if ldconfig -p | grep -q 'libEGL_mesa.so.0' && ldconfig -p | grep -q 'libEGL.so.1'; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
			$(RENDER_PKGS); } || echo "could not install $(RENDER_PKGS): the eval.video test will be skipped" >&2; \
	else echo "no offscreen GL renderer (apt-get install $(RENDER_PKGS)): the eval.video test will be skipped" >&2; fi

run: venv
	$(PY) -m gmiexp

# The suite runs with empty caches (matplotlib's font cache, XDG, W&B), as on a fresh machine: a first run's
# one-off log lines must not reach stdout, and a used machine must not hide that. Warp's compiled mjlab kernels
# are build products, not first-run state: `make venv` compiles them beside the venv (WARP_CACHE).
FRESH_CACHES = tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	export MPLCONFIGDIR="$$tmp/mpl" XDG_CACHE_HOME="$$tmp/cache" XDG_CONFIG_HOME="$$tmp/config" \
	WANDB_CACHE_DIR="$$tmp/wandb-cache" WANDB_CONFIG_DIR="$$tmp/wandb-config" WANDB_MODE=offline \
	WARP_CACHE_PATH="$(WARP_CACHE)" &&

# Tests wait on processes much of the time: one pytest-xdist worker per core (at most 4), a test file per worker
# (--dist loadfile: a module's shared fixtures are made once). TEST_WORKERS=0 runs them in this one process.
TEST_WORKERS ?= auto
XDIST = -n $(TEST_WORKERS) --maxprocesses=4 --dist loadfile

test: venv
	$(FRESH_CACHES) $(PY) -m pytest -q --durations=15 $(XDIST); rc=$$?; if [ $$rc -eq 5 ]; then echo "no tests collected"; exit 0; fi; exit $$rc

test-slow: venv
	$(FRESH_CACHES) $(PY) -m pytest -q --durations=15 $(XDIST) -m slow

# rsl_rl as an Isaac Lab 3.0 user has it: rsl-rl-lib $(RSLRL_ISAACLAB) and no mjlab (mjlab 1.6.0 pins 5.4.2, the
# venv's, which `make test` runs). The environment sits in the venv's folder and builds in seconds: every package of
# the venv linked in but mjlab and rsl_rl, and rsl-rl-lib installed into it without dependencies (the venv has
# them). The rsl_rl tests run there (tests/rl/rslrl and any test file named for rsl_rl); those needing mjlab skip,
# and pytest's summary names them.
RSLRL_ISAACLAB ?= 5.5.1
ISAACLAB_ENV := $(VENV)/rslrl-$(RSLRL_ISAACLAB)
RSLRL_TESTS ?= tests/rl/rslrl $(filter-out tests/rl/rslrl/%,$(wildcard tests/test_*rsl*.py tests/*/test_*rsl*.py tests/*/*/test_*rsl*.py))
PURELIB = -c 'import sysconfig; print(sysconfig.get_path("purelib"))'

$(ISAACLAB_ENV)/.installed: $(STAMP)
	rm -rf $(ISAACLAB_ENV)
	$(PY) -m venv --without-pip $(ISAACLAB_ENV)
	src=$$($(PY) $(PURELIB)) && dst=$$($(ISAACLAB_ENV)/bin/python $(PURELIB)) && \
	for f in "$$src"/*; do case "$${f##*/}" in mjlab|mjlab-*|rsl_rl|rsl_rl_lib-*) ;; *) ln -s "$$f" "$$dst/" ;; esac; done && \
	$(PY) -m pip install -q --no-deps --target "$$dst" "rsl-rl-lib==$(RSLRL_ISAACLAB)"
	touch $@

test-rslrl-isaaclab: $(ISAACLAB_ENV)/.installed
	@if $(ISAACLAB_ENV)/bin/python -c 'import mjlab' 2>/dev/null; then echo "mjlab is importable in $(ISAACLAB_ENV)" >&2; exit 1; fi
	@echo "rsl-rl-lib $$($(ISAACLAB_ENV)/bin/python -c 'import importlib.metadata as m; print(m.version("rsl-rl-lib"))'), mjlab not importable ($(ISAACLAB_ENV)): $(RSLRL_TESTS)"
	$(FRESH_CACHES) $(ISAACLAB_ENV)/bin/python -m pytest -q --durations=10 $(XDIST) $(RSLRL_TESTS)

test-gpu: venv
	$(PY) -m pytest -q -m gpu

# A real single-host Slurm (Debian's slurm-wlm, slurmdbd + MariaDB, munge; installed when missing, as root) on
# loopback: the sbatch script, a gmiexp_slurm sweep, a failing member, requeue with resume. Minutes; not in `make test`.
test-slurm: venv
	PY=$(abspath $(PY)) bash tests/slurm/run.sh

# On a GPU host: gpu-marked tests + a smoke matrix of every layout and backend; writes gpu-check.md
# (exits 2 on a host without a GPU).
gpu-check: venv
	$(PY) -m gmiexp.tools.gpu_check

# ruff, and the layers contract in pyproject.toml ([tool.importlinter]; DESIGN.md "Layers"), which fails the build
lint: venv
	$(PY) -m ruff check src tests experiments
	$(VENV)/bin/lint-imports --no-cache

clean:
	rm -rf $(VENV) outputs multirun
