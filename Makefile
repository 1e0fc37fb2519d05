# kvpool -- every target creates .venv and installs into it on first use, so any
# of them works as the first command typed on a fresh machine.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
VERIFY_STAMP := $(VENV)/.verify-stamp

.PHONY: help install test test-deep verify lint format clean bench

help:  ## this list
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/^([a-z-]+):[^#]*## (.*)/\1\t\2/' \
		| awk -F '\t' '{ printf "make %-22s %s\n", $$1, $$2 }'

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP) $(VERIFY_STAMP)

install: $(STAMP)  ## create .venv and install kvpool with its tools (every target does this first)

# `make verify` needs only what its checks run (the `verify` extra: the solvers, CrossHair,
# pytest), not the dev tools (docs, linters, mutmut): on a fresh machine, where its ten
# minutes include the install, it installs that much; a full install (above) covers it.
$(VERIFY_STAMP): pyproject.toml
	if [ $(STAMP) -nt pyproject.toml ]; then touch $(VERIFY_STAMP); else \
	  $(PYTHON) -m venv $(VENV) && \
	  $(BIN)/python -m pip install --quiet --upgrade pip && \
	  $(BIN)/python -m pip install --quiet -e '.[verify]' && touch $(VERIFY_STAMP); fi

BENCH_STAMP := $(VENV)/.bench-stamp
$(BENCH_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[dev,bench]'
	touch $(BENCH_STAMP)

bench: $(BENCH_STAMP)  ## every benchmark; rewrites docs/benchmarks.md and its plot
	$(BIN)/python benchmarks/report.py $(BENCH_ARGS)

test: $(STAMP)  ## the test suite (what CI runs)
	$(BIN)/python -m pytest -n auto --dist loadfile  # a docs page's examples share one namespace

test-deep: $(STAMP)  ## the test suite with the slow tests make test skips (KVPOOL_DEEP=1: tens of CPU s each)
	KVPOOL_DEEP=1 $(BIN)/python -m pytest -n auto --dist loadfile

verify: $(VERIFY_STAMP)  ## the main job: every check, then the matrix of what was proved, checked and found
	$(BIN)/python -m kvpool.verify $(VERIFY_ARGS)

lint: $(BENCH_STAMP)  ## ruff and mypy (benchmarks too, so it installs the bench extras)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy -p kvpool.spec -p kvpool.impl -p kvpool.oracle -p kvpool.proofs -p kvpool.contracts -p kvpool.mutants -m kvpool.verify
	$(BIN)/mypy benchmarks/*.py

format: $(STAMP)  ## ruff format
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

clean:  ## remove .venv, caches and build output
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis build *.egg-info

.PHONY: docs play

docs: $(STAMP)  ## redraw the figures from the spec, build the offline site in site/
	$(BIN)/python -m kvpool.oracle.render docs/figures
	$(BIN)/python docs/_gen/make_zoo.py
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet
	@echo "open site/index.html (works from file://)"

play: $(STAMP)  ## step through pool operations on the spec and the reference pool
	$(BIN)/python -m kvpool.oracle.play

.PHONY: fuzz mutation

FUZZ_CALLS ?= 1000000

fuzz: $(STAMP)  ## long lockstep campaign (profile deep), then the stress harness: FUZZ_CALLS mixed calls, under python and python -O
	KVPOOL_PROFILE=deep $(BIN)/python -m pytest -p xdist -n auto -q tests/test_lockstep.py
	$(BIN)/python tests/stress.py --calls $(FUZZ_CALLS) --runs 10 --seed 0
	$(BIN)/python -O tests/stress.py --calls $(FUZZ_CALLS) --runs 10 --seed 100

MUTATION_DIR := build/mutation

mutation: $(STAMP)  ## mutmut over impl/ and spec/ with a fast test selection ([tool.mutmut])
	rm -rf $(MUTATION_DIR) && mkdir -p $(MUTATION_DIR)/kvpool
	cp -rL impl spec oracle $(MUTATION_DIR)/kvpool/
	cp kvpool/__init__.py $(MUTATION_DIR)/kvpool/
	cp -r tests pyproject.toml $(MUTATION_DIR)/
	cd $(MUTATION_DIR) && $(CURDIR)/$(BIN)/mutmut run --max-children 2; \
	  $(CURDIR)/$(BIN)/mutmut results --all true > results.txt; \
	  $(CURDIR)/$(BIN)/python -c "import collections,re; \
	  c=collections.Counter(l.rsplit(': ',1)[-1].strip() for l in open('results.txt') if ': ' in l); \
	  k=c['killed']+c['timeout']; t=sum(c.values()); \
	  print(dict(c)); print(f'mutation score: {k}/{t} = {100*k/max(t,1):.1f}%')"

.PHONY: conform-vllm conform-mutants oracle-bench vectors

conform-vllm: $(STAMP)  ## every level against vLLM 0.33.0's real pool (downloads the wheel once), the findings, the serving-workload log check
	KVPOOL_DEEP=1 $(BIN)/python -m pytest -q tests/test_oracle_findings.py tests/test_steering.py
	mkdir -p build/conform-vllm
	-for level in safety exact robust; do \
	  $(BIN)/kvpool conform --target vllm==0.33.0 --level $$level --examples 300 \
	    --json build/conform-vllm/$$level.json --save-trace build/conform-vllm; done
	$(BIN)/python -m kvpool.oracle.workload build/conform-vllm/serving.log --blocks 12
	-$(BIN)/kvpool check-log build/conform-vllm/serving.log

conform-mutants: $(STAMP)  ## kvpool conform (robust) on every mutant of the bug catalogue
	$(BIN)/python -m kvpool.oracle.catalogue --examples 500 --json build/conform-mutants.json

oracle-bench: $(STAMP)  ## checking throughput of the oracle: every level, 1,000 and 10,000 blocks, reference and vLLM
	$(BIN)/python benchmarks/oracle_throughput.py

.PHONY: proofs proofs-deep
# z3 proofs (BMC, unbounded induction, linked-list refinement, mutants); `python -m kvpool.proofs
# --help` for --deep / --fast / --json FILE. PROOFS_ARGS passes extra flags.
proofs: $(STAMP)  ## z3: fixed-N induction (every k, N 1..8) with cvc5, induction for every N, BMC and mutants, the list refinement
	$(BIN)/python -m kvpool.proofs $(PROOFS_ARGS)

# The deep profile's parts run side by side, one per core, each in its own interpreter
# (kvpool.verify's scheduler; its first whole run took 6,750 s on 2 cores under load:
# docs/obligations-deep.md). DEEP_ARGS passes
# kvpool.verify's flags (--json FILE, --obligations FILE, --jobs N, --keep DIR);
# `python -m kvpool.proofs --deep` runs the same parts in one process, one after another.
proofs-deep: $(STAMP)  ## the proofs with the deep profile: fixed-N to N=8, BMC 6x8, Spacer, cvc5 at every N
	$(BIN)/python -m kvpool.verify --profile deep --only proofs $(DEEP_ARGS)

vectors: $(STAMP)  ## regenerate the golden vectors from the spec, check them, measure spec coverage
	$(BIN)/python -m kvpool.oracle.vectors generate --examples 200
	$(BIN)/kvpool vectors check

.PHONY: contracts

contracts: $(STAMP)  ## CrossHair over the contract entry points (full profile; 173 s quiet, 7-13 min measured under load); red on a counterexample
	$(BIN)/python -m kvpool.contracts --profile full

.PHONY: contracts-hypothesis

contracts-hypothesis: $(STAMP)  ## the lockstep machine under Hypothesis's CrossHair backend vs random, per mutant
	$(BIN)/python -m kvpool.contracts.hypothesis_mode --examples 30

.PHONY: vllm-env test-vllm
# A separate venv with vLLM 0.33.0 on CPU torch, for running vLLM's own KVCacheManager and
# Scheduler on kvpool's pool (not part of `make test`; about 3 GB). TORCH_CPU names the CPU
# build of torch: this machine's wheel store has 2.13.0+cpu; elsewhere use
# TORCH_CPU='torch --index-url https://download.pytorch.org/whl/cpu'.
VLLM_VENV   := build/vllm-venv
VLLM_BIN    := $(VLLM_VENV)/bin
VLLM_STAMP  := $(VLLM_VENV)/.installed-stamp
TORCH_CPU   ?= torch==2.13.0+cpu

$(VLLM_STAMP): requirements-vllm.txt pyproject.toml
	$(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_BIN)/python -m pip install --quiet --upgrade pip
	$(VLLM_BIN)/python -m pip install --quiet $(TORCH_CPU)
	$(VLLM_BIN)/python -m pip install --quiet --no-deps vllm==0.33.0
	$(VLLM_BIN)/python -m pip install --quiet -r requirements-vllm.txt
	$(VLLM_BIN)/python -m pip install --quiet -e .
	$(VLLM_BIN)/python -c "from vllm.v1.core.kv_cache_manager import KVCacheManager; \
	  from vllm.v1.core.sched.scheduler import Scheduler; from vllm.v1.request import Request"
	touch $(VLLM_STAMP)

vllm-env: $(VLLM_STAMP)  ## build/vllm-venv: vLLM 0.33.0 on CPU torch, kvpool installed editable (~3 GB)

test-vllm: $(VLLM_STAMP)  ## vLLM's KVCacheManager and Scheduler (built offline, made-up model outputs) on vLLM's pool and on kvpool's, compared
	KVPOOL_VLLM_TESTS=1 $(VLLM_BIN)/python -m pytest -q -p no:cacheprovider tests/vllm docs/10-vllm.md

.PHONY: conform-releases

conform-releases: $(STAMP)  ## every vLLM release 0.8.0..newest (downloads each wheel once, keeps 2 files): safety+exact matrix into docs/matrix.md and docs/errata.md
	-$(BIN)/kvpool matrix --from 0.8.0 --to latest --level safety --level exact --examples $(or $(MATRIX_EXAMPLES),30) --json build/matrix.json
	$(BIN)/python -m pytest -q -n 0 tests/releases/check_every_release.py
