# MD-AME: every target installs what it needs first, so each works on a fresh machine.
SHELL := /bin/bash
VENV  ?= .venv
BIN   := $(VENV)/bin
export ENV ?= dev
export PYTHONUNBUFFERED := 1

.PHONY: help install db db-stop demo test test-fast ui chaos chaos-sequence bench lint clean

help:
	@echo "make demo      install, start the local PostgreSQL, run today's videos on offline providers"
	@echo "make test      install, start what the tests need, run them"
	@echo "make ui        the Dagster UI on http://127.0.0.1:3000"
	@echo "make db        start (or reuse) the local cluster and migrate;  make db-stop stops it"
	@echo "make bench     queue throughput benchmark;  make lint  ruff"

install:
	@scripts/install.sh

db: install
	@scripts/db-local.sh start
	@$(BIN)/mdame db migrate

db-stop:
	@scripts/db-local.sh stop

demo: db
	@$(BIN)/mdame demo

test: db
	@$(BIN)/python -m pytest -q $(PYTEST_ARGS)

ui: db
	@$(BIN)/mdame ui

chaos: db
	@$(BIN)/mdame chaos

# Five SIGKILLs of the demo's process group at random moments, then one more demo: it must
# complete in bounded time and leave nothing behind (ARGS=--fresh for scratch databases).
chaos-sequence: db
	@$(BIN)/python tests/liveness/chaos_sequence.py $(ARGS)

bench: db
	@$(BIN)/python bench/queue.py

lint: install
	@$(BIN)/ruff check .
