# Set-up and entry points. `make main` and `make test` each work on a fresh machine by themselves.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
CSRC := $(shell find csrc -name '*.cpp' -o -name '*.h')

.PHONY: main test test-adaptive test-conformance test-distributed test-ecosystem lint bench coverage upstream-tests sweep-models nki-sweep install clean

main: install  ## Train and run real models on `neuron`, checked against the CPU.
	$(BIN)/python -m examples.main_job

test: install  ## Lint, format check and the test suite.
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m pytest -n 2 --durations=15 tests

test-adaptive: install  ## The lowering, runtime, compile and workload tests and the OpInfo sample with adaptive eager on (about 10 minutes).
	TORCH_NEURONX_ADAPTIVE_EAGER=1 $(BIN)/python -m pytest -n 2 tests/lowering tests/runtime tests/conformance/test_opinfo_sample.py tests/dynamo tests/workloads \
		--ignore=tests/runtime/test_executable_cache.py  # counts one executable per op, which fusing changes

test-conformance: install  ## The OpInfo sample in three dtypes, every OpInfo's error inputs, the runner's worker (minutes).
	TORCH_NEURONX_CONFORMANCE_FULL=1 $(BIN)/python -m pytest -n 2 tests/conformance

test-distributed: install  ## The full distributed suite: 2-process jobs, torchrun, faults (about 7 minutes on 2 cores).
	TORCH_NEURONX_DISTRIBUTED_FULL=1 $(BIN)/python -m pytest -v tests/distributed

test-ecosystem: install  ## PEFT, TRL, Diffusers, sentence-transformers and timm against the CPU, in full (minutes).
	TORCH_NEURONX_ECOSYSTEM_FULL=1 $(BIN)/python -m pytest -v --durations=0 tests/workloads/test_ecosystem.py

bench: install  ## Eager per-op cost on neuron next to torch CPU, as ratios.
	$(BIN)/python -m bench.eager_ops

coverage: install  ## PyTorch's OpInfo database on neuron against the CPU (about 100 minutes): docs/coverage.md.
	$(BIN)/torch-neuronx conformance --budget-minutes 100 --out reports/conformance
	$(BIN)/python -c "import pathlib; from torch_neuronx.testing import upstream; \
		upstream.publish('docs/coverage.md', rest=pathlib.Path('reports/conformance/summary.md').read_text())"

upstream-tests: install  ## PyTorch's own test files on neuron (about an hour; needs third_party/pytorch_tests/README.md's files): docs/coverage.md.
	$(BIN)/torch-neuronx upstream-tests --budget-minutes 60 --sample 200 --no-progress --out reports/upstream --publish docs/coverage.md

sweep-models: install  ## Every transformers architecture, reduced, on neuron against the CPU: docs/models.md.
	$(BIN)/torch-neuronx sweep-models --budget-minutes 60 --resume --journal docs/models/outcomes.jsonl --out reports/models
	cp reports/models/summary.md docs/models.md
	cp reports/models/models_pass_rates.png docs/models_pass_rates.png

nki-sweep: install  ## The NKI kernel library against PyTorch on larger shapes (minutes): reports/nki/summary.md.
	$(BIN)/python -m nki.sweep --out reports/nki

install: $(VENV)/.installed torch_neuronx/.built

# torch 2.13 (CPU build) first: the C++ core is compiled against it, without build isolation.
$(VENV)/.installed: pyproject.toml setup.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet 'torch==2.13.0' 'setuptools>=64' wheel ninja
	TORCH_DEVICE_BACKEND_AUTOLOAD=0 MAX_JOBS=2 $(BIN)/pip install --quiet --no-build-isolation -e '.[test,examples]'
	touch $@ torch_neuronx/.built

# Incremental rebuild of the C++ core after a change in csrc/. Without autoload: the package's
# Python side may need what the new core adds.
torch_neuronx/.built: $(CSRC) $(VENV)/.installed
	TORCH_DEVICE_BACKEND_AUTOLOAD=0 MAX_JOBS=2 $(BIN)/python setup.py --quiet build_ext --inplace
	touch $@

clean:
	rm -rf build $(VENV) torch_neuronx/_C*.so torch_neuronx/.built *.egg-info
