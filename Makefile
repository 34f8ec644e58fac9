# gpuyard: `make run` installs and starts the embedded platform; `make test` installs and tests.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT_PACKAGES := crun runc gcc python3-venv python3-dev umoci skopeo busybox-static chromium prometheus \
	containernetworking-plugins nftables iproute2
PORT   ?= 8080
# the default tenant's storage root, given on the first start (made 0700, owned by the tenant)
STORAGE ?= /srv/gpuyard

.PHONY: run test system venv host lint clean compiled test-compiled bench-sim

# what a replay runs, compiled by mypyc (`make compiled`, docs/sim.md): the scheduler, the
# model's value types and the simulator's engine; the rest of the package stays as it is
COMPILED := build/compiled
MYPYC_MODULES := $(addprefix gpuyard/scheduler/,baselines.py cycle.py explain.py fits.py \
	laspool.py limits.py mirror.py multitenant.py order.py packing.py pending.py preempt.py \
	quota.py reasons.py remaining.py round.py snapshot.py state.py victimtable.py view.py) \
	$(addprefix gpuyard/model/,demand.py placement.py resources.py running.py tenant.py value.py) \
	gpuyard/sim/engine.py gpuyard/sim/cluster.py

system: ## the system parts: OCI runtimes, a C compiler and Python headers (fake NVML in tests, make compiled), chromium (portal tests), CNI plugins + nftables + iproute2 (task networks)
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
	$(BIN)/gpuyard up --port $(PORT) --fake-gpus-if-none 4xA100-80GB --storage-root $(STORAGE)

lint: venv
	$(BIN)/ruff check src tests bench
	$(BIN)/lint-imports
	$(BIN)/mypy --ignore-missing-imports src/gpuyard/scheduler $(filter-out src/gpuyard/scheduler/%,$(addprefix src/,$(MYPYC_MODULES)))
	@command -v promtool >/dev/null || { echo "no promtool: run 'make system' (Debian's prometheus)" >&2; exit 1; }
	promtool check rules deploy/prometheus/alerts.yml
	promtool check config --syntax-only deploy/prometheus/prometheus.yml  # (the token file is the server's)

test: system venv host lint ## every test, real containers and a real server included
	$(BIN)/pytest -q
	$(MAKE) test-compiled

compiled: $(COMPILED)/.built ## a copy of the package with the scheduler compiled (mypyc)

$(COMPILED)/.built: $(BIN)/.installed $(shell find src/gpuyard -name '*.py')
	rm -rf $(COMPILED) && mkdir -p $(COMPILED) && cp -r src/gpuyard $(COMPILED)/
	cd $(COMPILED) && $(abspath $(BIN))/mypyc --ignore-missing-imports $(MYPYC_MODULES) \
	  > mypyc.log 2>&1 || { tail -40 mypyc.log; exit 1; }
	rm -rf $(COMPILED)/build
	touch $@

bench-sim: compiled ## issue 4's Philly comparison (A and B) on the compiled build
	PYTHONPATH=$(COMPILED) $(BIN)/python bench/sim_quality.py

# the scheduler and simulator tests again, on the compiled build (not the one that runs the
# live controller and its API: the platform does not run from this build, `gpuyard up` says so)
test-compiled: compiled
	GPUYARD_COMPILED=1 PYTHONPATH=$(COMPILED) $(BIN)/pytest -q -p no:cacheprovider \
	  tests/scheduler tests/sim --deselect tests/sim/test_sim_vs_controller.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache
