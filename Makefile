# Two entry points, both self-contained on a fresh Debian machine (run as root or with sudo):
#   make demo   system packages + virtualenv + the mini recipe end to end
#   make test   system packages + virtualenv + the test suite
SHELL := /bin/bash
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
APT_PKGS := espeak-ng libespeak-ng1 flite libflite1 sctk libfst-tools g++ python3-dev sox
STAMP := $(VENV)/.installed

.PHONY: all deps venv test demo lint bench study faults studies sim-studies network outer-network methods-2026 methods-2026-lost \
  stragglers projection staging-cost gpu-check wheelhouse clean

all: test

# Debian packages: espeak-ng and flite (mini corpus voices), NIST sctk (sclite, for scoring checks),
# OpenFst's tools (fstconvert writes the const graphs the decoding tests read), and g++ with
# Python's headers (the compiled lattice search and determinizer, asrdist/decode/lattice/csrc/).
deps:
	@missing=""; for p in $(APT_PKGS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  SUDO=$$( [ $$(id -u) -eq 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null; \
	fi

# torch is installed first and pinned, so no dependency can pull the CUDA build. The editable
# install compiles asrdist/decode/lattice/csrc/*.cpp into asrdist.decode.lattice._native (g++,
# pybind11): a changed source rebuilds.
$(STAMP): setup.cfg pyproject.toml setup.py $(wildcard asrdist/decode/lattice/csrc/*.cpp)
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

venv: $(STAMP)

# The tests run on every core (pytest-xdist; TEST_WORKERS=1 for one process), work stealing
# between the workers, each starting on its share of the heavy tests (tests/conftest.py).
TEST_WORKERS ?= auto
test: deps venv
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist worksteal tests

lint: venv
	$(BIN)/ruff check .

demo: deps venv
	cd recipes/mini && PATH="$(CURDIR)/$(BIN):$$PATH" ./run.sh

# Benchmarks print their tables; --publish makes one its bench/results/<script>.md. What was
# found, with the command of each figure, is bench/RESULTS.md (by hand; readings: bench/readings/).
bench: deps venv
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m bench.train_throughput --steps 60 --repeats 5
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m bench.consensus --rounds 80 --pace-ms 10
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m bench.straggler --steps 80 --factor 3 \
	  --learners 4 --learners-per-node 2 --slow-rank 1 --width 256 --sim-compute-ms 40
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m bench.ngsgd_throughput --steps 60

# The one command to run first on a machine with a GPU (bench/gpu_check.py): the CUDA tests, the
# paper-size BLSTM's frames/s in fp32/bf16/fp16, the trainer against a bare loop, ADPSGD's
# exchange, every strategy's learners, NG-SGD, the simulator, in that order, inside a time
# budget (GPU_CHECK_ARGS="--budget 300"); each part's tables go into bench/results/gpu_check.md
# as it ends.
# Without CUDA it runs the same code at tiny size on the CPU and writes nothing (the test run
# does that too). On a bare host (no venv, no package index) with the wheels installed into a
# directory (docs/install.md, "Offline install"): make gpu-check GPU_PY=python3 PYTHONPATH=wheels:.
GPU_PY ?= $(BIN)/python
GPU_CHECK_ARGS ?=
gpu-check: $(if $(filter $(BIN)/python,$(GPU_PY)),venv)
	$(GPU_PY) -m bench.gpu_check $(GPU_CHECK_ARGS)

# Offline install (docs/install.md, "Offline install"): the wheel of every runtime dependency for one
# CPython (WHEEL_PY, e.g. 312) and platform (WHEEL_PLATFORM: the node's manylinux tag; older
# manylinux tags are added), and asrdist's own, into wheelhouse/. Defaults: this machine's.
# torch is left out (a GPU node brings its own) unless WHEEL_TORCH names one, e.g.
# WHEEL_TORCH=torch==2.13.0+cpu; WHEEL_MPICH=0 leaves out the MPICH wheel too (an image with its
# own MPI). Needs python3 with pip >= 22.2 and packaging, and a package index.
WHEELHOUSE ?= wheelhouse
WHEEL_PY ?= $(shell $(PY) -c 'import sys; print("%d%d" % sys.version_info[:2])')
WHEEL_PLATFORM ?= $(shell $(PY) -c 'import platform; \
  print("manylinux_%s_%s_%s" % (*platform.libc_ver()[1].split(".")[:2], platform.machine()))')
WHEEL_TORCH ?=
WHEEL_MPICH ?= 1
wheelhouse:
	$(PY) local/wheelhouse.py --dest $(WHEELHOUSE) --python-version $(WHEEL_PY) \
	  --platform $(WHEEL_PLATFORM) $(if $(WHEEL_TORCH),--torch '$(WHEEL_TORCH)') \
	  $(if $(filter 0,$(WHEEL_MPICH)),--no-mpich)
	$(PY) -m pip wheel --quiet --no-deps --wheel-dir $(WHEELHOUSE) .
	ls $(WHEELHOUSE)

# Fault injection with real learner processes (root for its tmpfs and network-namespace rows);
# writes its table to bench/results/faults.md. Not part of `make test`.
faults: deps venv
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m bench.faults --publish

# Held-out cross-entropy of every strategy at 2 and 4 learners; needs `make demo` first.
study: deps venv
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m bench.strategies_study --epochs 3 --units 64 \
	  --publish

# Issue 11 studies; each writes its own bench/results/<study>.md (PNG and JSON beside it).
# Not part of `make test`. network needs root (namespaces, tc); projection reads the network
# study's bench/results/network.json and Study 1's bench/results/large_batch.md.
studies: network stragglers projection staging-cost

# The simulator's studies (issue 11: studies 1, 2 at scale, 3) read a mini corpus's features
# and alignments, as measured in bench/results/: `cd recipes/mini && ./run.sh --stop-stage 3
# --hours 3 --augment false --nnet-feats fbank` (or more hours), then
# `make sim-studies STUDY_DATA=... STUDY_TARGETS=...`. Runs are cached in STUDY_CACHE.
STUDY_DATA ?= recipes/mini/data/train_fbank
STUDY_TARGETS ?= recipes/mini/exp/mono_pdf
STUDY_CACHE ?= /tmp/asrdist-studies
# Study 1's WER: the recipe's graph, the test features of STUDY_DATA's kind and the test text
STUDY_WER ?= recipes/mini/exp/graph recipes/mini/data/test_fbank recipes/mini/data/test/text
STUDY_ARGS = --data $(STUDY_DATA) --targets $(STUDY_TARGETS) --cache $(STUDY_CACHE)
sim-studies: deps venv
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m bench.sim_cost --learners 16 64 128 --steps 3 \
	  --publish
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m bench.studies.delay1_mixing $(STUDY_ARGS) \
	  --max-utts 1600 --hours 3 --publish
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m bench.studies.large_batch $(STUDY_ARGS) \
	  --hours 0.75 --epochs 6 --multiples 4 8 16 32 64 --wide-multiples 16 64 --strategies ssgd adpsgd-random \
	  --few-strategies adpsgd-fixed adpsgd-delay1 adpsgd-delayavg hadpsgd ma bmuf diloco \
	  --few-multiples 4 16 32 64 \
	  --noise-every 20 --check-epochs 11 --wer $(STUDY_WER) --publish
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m bench.studies.stragglers_sim $(STUDY_ARGS) \
	  --max-utts 300 --learners 16 64 --evals 6 --publish
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m bench.studies.outer_methods $(STUDY_ARGS) \
	  --epochs 1 --seeds 2 --hours 0.75 --publish

network: deps venv
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m bench.studies.network --rates 1gbit,250mbit,100mbit \
	  --steps 20 --publish

# Issues 23 and 34: bmuf, diloco, streaming-diloco and diloco-async against adpsgd-random and
# ssgd (int8 rows too; a single learner the reference) on the network study's namespaces at
# 100 Mbit (root; about 40 minutes).
outer-network: deps venv
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m bench.studies.outer_network --rates 100mbit \
	  --steps 200 --publish

# Issue 34 item 5: the strategies side by side in the simulator (16 and 64 learners, a 4x
# straggler, int8 or not, and the K = 1 control) on the augmented mini corpus (~1.5 h on 2 cores)
methods-2026: deps venv
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m bench.studies.methods_2026 \
	  --data recipes/mini/data/train_aug_fbank --targets $(STUDY_TARGETS) \
	  --out $(STUDY_CACHE)/methods_2026 --publish

# Issue 34 item 5, the lost learner: the same grids at 16 and 64 learners in scenario
# straggler:0x4+lost:5@0.5 beside straggler:0x4 (2 seeds at 16, 1 at 64), published to its own file
methods-2026-lost: deps venv
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m bench.studies.methods_2026_lost \
	  --data recipes/mini/data/train_aug_fbank --targets $(STUDY_TARGETS) \
	  --out $(STUDY_CACHE)/methods_2026 --publish

stragglers: deps venv
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m bench.studies.stragglers --steps 100 \
	  --publish

projection: deps venv
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m bench.projection --publish

staging-cost: deps venv
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m bench.staging_cost --publish

clean:
	rm -rf $(VENV) recipes/*/data recipes/*/exp
