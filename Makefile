# The two commands a newcomer needs: `make run` and `make test`.

# Python caches compiled modules (and pytest its assertion-rewritten tests) in __pycache__,
# git-ignored: an environment's PYTHONDONTWRITEBYTECODE would have every test worker and
# every `squadops` process the suite starts compile the project from source again.
unexport PYTHONDONTWRITEBYTECODE
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cksum pyproject.toml | cut -d' ' -f1)
# The installer is pinned too.
PIP_VERSION := 26.3

# The agent CLIs of the local execution plane (pinned in .clis/package-lock.json), put on PATH.
CLIS := .clis
CLIS_STAMP := $(CLIS)/node_modules/.installed-$(shell cksum $(CLIS)/package-lock.json | cut -d' ' -f1)
WITH_CLIS := PATH="$(CURDIR)/$(CLIS)/node_modules/.bin:$$PATH"

# The pages' JavaScript checker (ESLint, pinned in .jslint/package-lock.json); the suite's
# tests/unit/test_javascript.py runs it and `node --check` over every module.
JSLINT := .jslint
JSLINT_STAMP := $(JSLINT)/node_modules/.installed-$(shell cksum $(JSLINT)/package-lock.json | cut -d' ' -f1)

.PHONY: install run test soak bench lint clean chromium clis sandbox jslint

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet pip==$(PIP_VERSION)
	$(PY) -m pip install --quiet -e '.[dev]'
	rm -f $(VENV)/.installed-*
	touch $@

# The pages, with the dev identity (loopback only), on 127.0.0.1:$(OPEN_PORT); the API on 8000.
OPEN_PORT ?= 8080
run: install clis sandbox
	$(WITH_CLIS) $(VENV)/bin/squadops serve --demo --open $(OPEN_PORT)

# The suite over TEST_WORKERS processes (pytest-xdist; it mostly waits on servers and
# subprocesses), a module's tests on one worker (its module-scoped fixtures built once), in
# collection order (tests/conftest.py starts the longest modules first); the 15 slowest
# tests listed at the end. pytest's exit 5 (no test ran) fails.
TEST_WORKERS ?= 4
test: install chromium clis sandbox jslint
	@$(WITH_CLIS) $(PY) -m pytest -n $(TEST_WORKERS) --dist loadscope --no-loadscope-reorder --durations=15 $(PYTEST_ARGS); code=$$?; \
	  if [ $$code -eq 5 ]; then echo "make test: pytest ran no test (exit 5)" >&2; fi; exit $$code

# Claude Code and Codex from npm, at the versions of .clis/package-lock.json; Node from
# Debian's nodejs when the machine has none.
clis: $(CLIS_STAMP)

# An npm project's packages at the versions of its lock file, stamped by the lock's checksum.
define npm_ci
	@command -v npm >/dev/null 2>&1 || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm; }
	cd $(1) && npm ci --no-audit --no-fund --loglevel=error
	rm -f $(1)/node_modules/.installed-*
	touch $@
endef

$(CLIS_STAMP): $(CLIS)/package.json $(CLIS)/package-lock.json
	$(call npm_ci,$(CLIS))

jslint: $(JSLINT_STAMP)

$(JSLINT_STAMP): $(JSLINT)/package.json $(JSLINT)/package-lock.json
	$(call npm_ci,$(JSLINT))

# The production-topology fault test, longer than its in-suite variant (seconds of faults and load).
SOAK_SECONDS ?= 300
soak: install
	SQUADOPS_SOAK_SECONDS=$(SOAK_SECONDS) $(PY) -m pytest tests/fault -s

# The agent sandbox of the local plane (issue 25): Debian's bubblewrap around every agent
# process, and socat inside it to reach the MCP server and the model endpoint.
sandbox:
	@test -x /usr/bin/bwrap && test -x /usr/bin/socat || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap socat; }

# The browser tests drive Debian's chromium (never a downloaded browser build).
chromium:
	@command -v chromium >/dev/null 2>&1 || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; }

bench: install clis sandbox
	$(WITH_CLIS) $(PY) -m bench

lint: install jslint
	$(VENV)/bin/ruff check domain projections api workers tests bench
	$(JSLINT)/node_modules/.bin/eslint --config $(JSLINT)/eslint.config.js --max-warnings 0 api/web/static/js

clean:
	rm -rf $(VENV) var $(CLIS)/node_modules $(JSLINT)/node_modules
