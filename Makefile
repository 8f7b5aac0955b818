# The two commands a newcomer needs: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cksum pyproject.toml | cut -d' ' -f1)

.PHONY: install run test soak bench lint clean chromium

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	rm -f $(VENV)/.installed-*
	touch $@

# The pages, with the dev identity (loopback only), on 127.0.0.1:$(OPEN_PORT); the API on 8000.
OPEN_PORT ?= 8080
run: install
	$(VENV)/bin/squadops serve --demo --open $(OPEN_PORT)

# The suite over TEST_WORKERS processes (pytest-xdist; it mostly waits on servers and
# subprocesses), a module's tests on one worker (its module-scoped fixtures built once), in
# collection order (tests/conftest.py starts the longest modules first); the 15 slowest
# tests listed at the end. pytest's exit 5 (no test ran) fails.
TEST_WORKERS ?= 4
test: install chromium
	@$(PY) -m pytest -n $(TEST_WORKERS) --dist loadscope --no-loadscope-reorder --durations=15 $(PYTEST_ARGS); code=$$?; \
	  if [ $$code -eq 5 ]; then echo "make test: pytest ran no test (exit 5)" >&2; fi; exit $$code

# The production-topology fault test, longer than its in-suite variant (seconds of faults and load).
SOAK_SECONDS ?= 300
soak: install
	SQUADOPS_SOAK_SECONDS=$(SOAK_SECONDS) $(PY) -m pytest tests/fault -s

# The browser tests drive Debian's chromium (never a downloaded browser build).
chromium:
	@command -v chromium >/dev/null 2>&1 || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; }

bench: install
	$(PY) -m bench

lint: install
	$(VENV)/bin/ruff check domain projections api workers tests bench

clean:
	rm -rf $(VENV) var
