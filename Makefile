# Each target sets itself up: a virtualenv in .venv with the project installed (editable).
# `demo`, `paper` and `soak` need the runtime only (numpy, scipy, pandas, matplotlib); `test`,
# `lint` and `setup` add the dev tools, Ray and torch on top, so the demo never waits for them.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
BASE_STAMP := $(VENV)/.installed-base
DEV_STAMP := $(VENV)/.installed-dev

.PHONY: demo test lint paper soak clean setup gpu-check native pure

# --no-compile: byte-compiling every file of scipy/pandas/matplotlib at install takes ~8 s of the
# demo's setup; Python compiles the modules the demo imports on first use instead (~2 s).
$(BASE_STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --no-compile -e .
	touch $(BASE_STAMP)

$(DEV_STAMP): $(BASE_STAMP)
	$(BIN)/python -m pip install -q --upgrade pip
	# torch only for `profile collect` tests; 2.13.0 is the CPU wheel on these machines.
	# ray for the --executor ray tests (tests/test_executor_ray.py).
	$(BIN)/python -m pip install -q -e '.[dev,ray]' 'torch==2.13.0'
	touch $(DEV_STAMP)

# The simulator's hot modules compiled with mypyc, in place (ppsched/native.py): about 2x as fast,
# outputs bit-identical. Rebuilt only when a compiled module's source changed (~45 s on 2 cores).
# No C compiler, or PPSCHED_NATIVE=0: ppsched runs as pure Python. A failed build stops here
# (a type error in a compiled module is a bug); `make pure` removes the build.
NATIVE_TOOLS_STAMP := $(VENV)/.installed-native-tools
$(NATIVE_TOOLS_STAMP): $(BASE_STAMP)
	$(BIN)/python -m pip install -q --no-compile 'mypy==2.4.1' 'setuptools>=64'
	touch $(NATIVE_TOOLS_STAMP)

native: $(BASE_STAMP)
	@if [ "$${PPSCHED_NATIVE:-1}" = 0 ]; then echo "native: PPSCHED_NATIVE=0: pure Python"; \
	elif ! command -v "$${CC:-cc}" >/dev/null 2>&1; then \
	  echo "native: no C compiler ($${CC:-cc}): ppsched runs as pure Python (about 2x slower)"; \
	else $(MAKE) --no-print-directory $(NATIVE_TOOLS_STAMP) \
	  && $(BIN)/python scripts/build_native.py; fi

pure: $(BASE_STAMP)
	$(BIN)/python scripts/build_native.py --clean

setup: $(DEV_STAMP) native

demo: native
	$(BIN)/ppsched demo --out results/demo

test: $(DEV_STAMP) native
	$(BIN)/ruff check ppsched tests bench scripts
	bash scripts/lint_history.sh
	# Real SGLang 0.5.23 on CPU for the live plugin tests: built once per machine (~3.5 GB,
	# ~2-4 min), cached in ~/.cache/ppsched/sglang-venv (PPSCHED_SGLANG_VENV overrides).
	bash scripts/setup_sglang_cpu.sh
	$(BIN)/python -m pytest -q -rs

lint: $(DEV_STAMP)
	$(BIN)/ruff check ppsched tests bench scripts
	bash scripts/lint_history.sh

# The full results stay untracked; the pinned summary (results/pinned/, docs/img/) and the docs
# generated from it (BENCHMARKS.md, README.md's results block) are what git tracks.
paper: native
	$(BIN)/ppsched paper --out results
	$(BIN)/ppsched report --pin paper --out results
	$(BIN)/ppsched report --benchmarks

soak: native
	$(BIN)/ppsched overload --size soak --out results/soak

# The plugin on this machine's GPUs (docs/SGLANG_PLUGIN.md "GPU check kit"). GPU_PY: a Python
# with CUDA torch, SGLang 0.5.23 and ppsched (pip install -e . --no-deps); without CUDA it says
# so in one line and fails.
GPU_PY ?= $(or $(PPSCHED_SGLANG_PYTHON),$(BIN)/python)
gpu-check:
	PYTHONPATH=$(CURDIR) $(GPU_PY) -m ppsched.cli.main gpu-check --out results/gpu-check

clean:
	rm -rf $(VENV) results/cache build/native
	-$(PY) scripts/build_native.py --clean
