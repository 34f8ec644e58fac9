# gpuyard: `make run` installs and starts the embedded platform; `make test` installs and tests.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT_PACKAGES := crun runc gcc python3-venv umoci skopeo busybox-static chromium prometheus
PORT   ?= 8080

.PHONY: run test system venv host lint clean

system: ## the system parts: OCI runtimes, a C compiler (fake NVML in tests), chromium (portal tests)
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then echo "installing:$$missing"; \
	  $(SUDO) apt-get update -qq && $(SUDO) DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; fi

host: venv ## host set-up for crun on hybrid cgroup v1 hosts (idempotent; runc needs none)
	-@$(SUDO) $(BIN)/python -m gpuyard.runtime.hostsetup

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $@

venv: $(BIN)/.installed

run: system venv host ## start gpuyard in the foreground on 127.0.0.1:$(PORT)
	$(BIN)/gpuyard up --port $(PORT) --fake-gpus-if-none 4xA100-80GB

lint: venv
	$(BIN)/ruff check src tests bench
	$(BIN)/lint-imports
	@command -v promtool >/dev/null || { echo "no promtool: run 'make system' (Debian's prometheus)" >&2; exit 1; }
	promtool check rules deploy/prometheus/alerts.yml
	promtool check config deploy/prometheus/prometheus.yml

test: system venv host lint ## every test, real containers and a real server included
	$(BIN)/pytest -q

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache
