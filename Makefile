# MD-AME: every target installs what it needs first, so each works on a fresh machine.
SHELL := /bin/bash
VENV  ?= .venv
BIN   := $(VENV)/bin
export ENV ?= dev
export PYTHONUNBUFFERED := 1

.PHONY: help install db db-stop demo test docs smoke ui chaos chaos-sequence chaos-providers bench bench-gpu bench-first-run bench-render bench-scale bench-ui lint clean

help:
	@echo "make demo      install, start the local PostgreSQL, run today's videos on offline providers"
	@echo "               (PROVIDERS=fakes: the production providers against local protocol servers)"
	@echo "make test      install, start what the tests need, run them"
	@echo "make docs      the documentation site into site/ (mkdocs --strict: a warning or broken link fails)"
	@echo "make doctor    check this deployment (ENV, database, providers, broker, store, GPU, ffmpeg, disk)"
	@echo "make test-live one private video through the real services; skips, saying why, without credentials"
	@echo "make ui        the Dagster UI on http://127.0.0.1:3000"
	@echo "make db        start (or reuse) the local cluster and migrate;  make db-stop stops it"
	@echo "make chaos     the crash matrix (tests/chaos); CHAOS_ARGS=\"--limit 5\" for a few points"
	@echo "make chaos-sequence  five SIGKILLs of the demo, then a demo that must finish clean"
	@echo "make chaos-providers SIGKILLs of the fakes demo while every server faults, then it must converge"
	@echo "               (ARGS=\"--fresh --seed N --kills N\"; --help for every option)"
	@echo "make bench     queue throughput next to a SKIP LOCKED floor;  make lint  ruff and mypy"
	@echo "make bench-gpu clips/min, s/clip, peak VRAM per diffusers engine (tiny CPU models without CUDA)"
	@echo "make bench-first-run  a fresh make demo next to its videos' encode floors"
	@echo "make bench-render  render time next to the raw encode floor (BENCH_ARGS=\"--repeats 5\")"
	@echo "make bench-scale   the schedule's and sensors' ticks with 1,000 dimensions (BENCH_ARGS=\"--dims 100\")"
	@echo "make bench-ui      the UI's partitions view of renders, 1,000 dimensions x 365 days, in chromium"
	@echo "make smoke     every make bench-* target at its smallest size (make test runs the cheap three)"
	@echo "make clean     remove caches and scratch files (keeps .venv, the database and media)"

install:
	@scripts/install.sh

db: install
	@scripts/db-local.sh start
	@$(BIN)/mdame db migrate

db-stop:
	@scripts/db-local.sh stop

# PROVIDERS=fakes: the production providers against local protocol servers (fakes/).
demo: db
	@if [ "$(PROVIDERS)" = fakes ]; then $(BIN)/python -m fakes.demo; \
	elif [ -z "$(PROVIDERS)" ] || [ "$(PROVIDERS)" = offline ]; then $(BIN)/mdame demo; \
	else echo "PROVIDERS must be offline (the default) or fakes, not '$(PROVIDERS)'" >&2; exit 2; fi

# Three workers on two cores, a test file each at a time (--dist loadfile keeps a file's
# fixtures together): the suite waits on subprocesses, ffmpeg and Dagster runs more than it
# computes (two workers kept the cores 62 % busy; three finish it in 86 % of the time). The
# browser test (dagster dev, its daemon and chromium) runs after them, alone: beside them on two
# cores it starved the other workers' signal and shutdown tests past their timeouts.
TEST_WORKERS ?= 3
test: db
	@$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile --ignore=tests/ui $(PYTEST_ARGS)
	@$(BIN)/python -m pytest -q tests/ui

# The documentation site (mkdocs.yml): strict, so a warning or a broken link or anchor fails it.
# docs/hooks.py writes the configuration page from the settings model at build time; nothing is
# fetched (no fonts, no CDN) while building. NO_MKDOCS_2_WARNING silences Material's banner
# about its own end of life, which is news, not a problem of these pages.
docs: install
	@NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

# Every bench target at its smallest size, the slow ones included (tests/smoke); make test runs the
# three that take seconds.
smoke: db
	@MDAME_SMOKE=1 $(BIN)/python -m pytest -q tests/smoke $(PYTEST_ARGS)

ui: db
	@$(BIN)/mdame ui

# Before the first real run (README): `mdame doctor` checks the deployment (exit 1 on a FAIL);
# test-live publishes one private video through the real services, only when their credentials
# are set (else it says what is missing and exits 0). test-live is never part of make test/CI.
.PHONY: doctor test-live
doctor: install
	@$(BIN)/mdame doctor $(DOCTOR_ARGS)
test-live: db
	@PYTHONPATH=$(CURDIR) $(BIN)/python -m tests.live.smoke $(LIVE_ARGS)

# The crash harness is test machinery (tests/chaos); e.g. make chaos CHAOS_ARGS="--limit 5".
# The crash harnesses make their media in the tiny profile (README, "Media profile"): their
# subject is state and recovery, not the encode. MDAME_MEDIA_PROFILE=shorts overrides it.
CHAOS_PROFILE = MDAME_MEDIA_PROFILE=$${MDAME_MEDIA_PROFILE:-tiny}
chaos: db
	@$(CHAOS_PROFILE) $(BIN)/python -m tests.chaos.main $(CHAOS_ARGS)

# Five SIGKILLs of the demo's process group at random moments, then one more demo: it must
# complete in bounded time and leave nothing behind (ARGS=--fresh for scratch databases).
chaos-sequence: db
	@PYTHONPATH=$(CURDIR) $(BIN)/python tests/liveness/chaos_sequence.py $(ARGS)

# SIGKILLs of `make demo PROVIDERS=fakes` while every local server faults at random (seeded),
# then a demo that must converge: published once, ledgers equal to the servers' counters.
chaos-providers: db
	@$(CHAOS_PROFILE) PYTHONPATH=$(CURDIR) $(BIN)/python -m tests.chaos.providers $(ARGS)

bench: db
	@$(BIN)/python bench/queue.py $(BENCH_ARGS)

# Generated visuals: clips/min, s/clip, peak VRAM per engine on CUDA (the tiny pipelines on the
# CPU without one), and the scene cache's saving on a day that repeats half of another's prompts.
bench-gpu: db
	@$(BIN)/python bench/gpu.py $(BENCH_ARGS)
# A fresh `mdame demo` next to the encode floors of the videos it published (scratch databases).
bench-first-run: db
	@PYTHONPATH=$(CURDIR) $(BIN)/python -m bench.first_run $(BENCH_ARGS)
# Render wall and CPU time next to the raw encode floor, and the probe pass's share; no database.
bench-render: install
	@PYTHONPATH=$(CURDIR) $(BIN)/python bench/render.py $(BENCH_ARGS)

# The control plane with many dimensions, on scratch databases of the local cluster.
bench-scale: db
	@PYTHONPATH=$(CURDIR) $(BIN)/python -m bench.scale $(BENCH_ARGS)

# The UI's partitions view in chromium over many dimensions x days, on scratch databases.
bench-ui: db
	@PYTHONPATH=$(CURDIR) $(BIN)/python -m bench.ui_partitions $(BENCH_ARGS)

# `dg check defs` loads each code location as Dagster's tools do, on a scratch instance. A dg
# project is the folder holding its package, and both locations share mdame_assets, so each
# location's project file (generated from mdame_runtime/locations.py, which checks them first)
# goes into a scratch folder that links the package.
lint: install
	@$(BIN)/ruff check .
	@$(BIN)/ruff format --check .
	@$(BIN)/mypy
	@$(BIN)/python -m mdame_runtime.locations
	@scratch=$$(mktemp -d) && trap 'rm -rf "$$scratch"' EXIT \
	  && mkdir "$$scratch/home" \
	  && printf 'telemetry:\n  enabled: false\n' > "$$scratch/home/dagster.yaml" \
	  && export DAGSTER_HOME="$$scratch/home" \
	  && for project in $$($(BIN)/python -m mdame_runtime.locations --dg-projects); do \
	       name=$$(basename "$$(dirname "$$project")") && mkdir "$$scratch/$$name" \
	       && cp "$$project" "$$scratch/$$name/" \
	       && ln -s "$(CURDIR)/mdame_assets" "$$scratch/$$name/mdame_assets" \
	       && echo "dg check defs: $$name" \
	       && (cd "$$scratch/$$name" && $(abspath $(BIN))/dg check defs) || exit 1; \
	     done

# Caches and scratch files only: .venv, the local cluster, media and the outbox stay.
clean:
	@rm -rf .pytest_cache .mypy_cache .ruff_cache .mdame/tmp
	@find . -path ./.venv -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +
