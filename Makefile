# gpuyard: `make run` installs and starts the embedded platform; `make test` installs and tests.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# what running needs (make run): OCI runtimes, image tools, task networks, a venv; the ssh
# plugin's sshd and client (runtime/sshkit.py copies them into a kit tasks mount)
RUN_APT  := crun runc python3-venv umoci skopeo containernetworking-plugins nftables iproute2 \
            dropbear-bin openssh-client
# what only the tests add (make test): a C compiler and Python headers (the fake NVML library,
# make compiled), busybox (test images), chromium (portal tests), prometheus (promtool in lint),
# postgresql (the server the store/controller/API tests start themselves: docs/postgresql.md;
# its binaries only: no cluster or service is used)
TEST_APT := gcc python3-dev busybox-static chromium prometheus postgresql
# torch only in tests (tests/ray's DDP job), and only ever the CPU wheel: the pin's local
# version (+cpu) is not on PyPI, so a missing CPU index fails instead of pulling CUDA's 4 GB
TORCH       := torch==2.13.0+cpu
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu
PORT   ?= 8080
# the default tenant's storage root, given on the first start (made 0700, owned by the tenant)
STORAGE ?= /srv/gpuyard

.PHONY: run port-free test system system-test venv venv-test host lint clean compiled test-compiled bench-sim

# what a replay runs, compiled by mypyc (`make compiled`, docs/sim.md): the scheduler, the
# model's value types and the simulator's engine; the rest of the package stays as it is
COMPILED := build/compiled
COMPILED_TEST := build/compiled-test
MYPYC_MODULES := $(addprefix gpuyard/scheduler/,baselines.py cycle.py explain.py fits.py \
	laspool.py limits.py mirror.py multitenant.py order.py packing.py pending.py preempt.py \
	quota.py reasons.py remaining.py round.py snapshot.py state.py victimtable.py view.py) \
	$(addprefix gpuyard/model/,demand.py placement.py resources.py running.py tenant.py value.py) \
	gpuyard/sim/engine.py gpuyard/sim/cluster.py

# apt-get install of the missing ones among $(1), without recommends (docs/benchmarks.md: size)
apt_install = @missing=""; for p in $(1); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then echo "installing:$$missing"; \
	  $(SUDO) apt-get update -qq && $(SUDO) DEBIAN_FRONTEND=noninteractive \
	  apt-get install -y -qq --no-install-recommends $$missing; fi

system: ## what running needs: OCI runtimes, image tools (umoci, skopeo), CNI plugins + nftables + iproute2 (task networks)
	$(call apt_install,$(RUN_APT))

system-test: ## what the tests add: gcc + Python headers, busybox, chromium, prometheus, postgresql
	$(call apt_install,$(TEST_APT))

# a second `make run` while one runs: say who holds the port, before installing or starting
port-free:
	@$(PYTHON) -c 'import socket, sys; sys.exit(socket.socket().connect_ex(("127.0.0.1", $(PORT))) == 0)' || { \
	  pid=$$(ss -Htlnp "sport = :$(PORT)" 2>/dev/null | grep -o 'pid=[0-9]*' | head -1 | cut -d= -f2); \
	  who=$${pid:+ by pid $$pid ($$(ps -o args= -p $$pid | cut -c1-100))}; \
	  echo "make run: 127.0.0.1:$(PORT) is already in use$$who." >&2; \
	  echo "  gpuyard already running? It is at http://127.0.0.1:$(PORT); stop it (Ctrl-C, or kill $${pid:-ITS_PID}), or: make run PORT=8081" >&2; \
	  exit 1; }

host: venv ## host set-up for crun on hybrid cgroup v1 hosts (idempotent; runc needs none)
	-@$(SUDO) $(BIN)/python -m gpuyard.runtime.hostsetup

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e .
	touch $@

# the CPU wheel first, alone, from its index; then the test tools (the pin in [dev] is met)
$(BIN)/.installed-test: $(BIN)/.installed
	$(BIN)/pip install -q --no-deps --retries 1 --extra-index-url $(TORCH_INDEX) '$(TORCH)'
	$(BIN)/pip install -q -e '.[dev]'
	touch $@

venv: $(BIN)/.installed ## the package and what running needs
venv-test: $(BIN)/.installed-test ## and the test tools, torch's CPU wheel included

run: port-free system venv host ## start gpuyard in the foreground on 127.0.0.1:$(PORT)
	$(BIN)/gpuyard up --port $(PORT) --fake-gpus-if-none 4xA100-80GB --storage-root $(STORAGE)

lint: venv-test
	$(BIN)/ruff check src tests bench
	$(BIN)/lint-imports
	$(BIN)/mypy --ignore-missing-imports src/gpuyard/scheduler $(filter-out src/gpuyard/scheduler/%,$(addprefix src/,$(MYPYC_MODULES)))
	@command -v promtool >/dev/null || { echo "no promtool: run 'make system' (Debian's prometheus)" >&2; exit 1; }
	promtool check rules deploy/prometheus/alerts.yml
	promtool check config --syntax-only deploy/prometheus/prometheus.yml  # (the token file is the server's)

# three workers on CI's 2 cores: most tests wait on servers, containers and clusters; a module
# stays on one worker and the Ray tests share one (tests/conftest.py); -n 0 runs them in order
TEST_WORKERS ?= 3

test: system system-test venv-test host lint ## every test, real containers and a real server included
	GPUYARD_TEST_PG=require $(BIN)/pytest -q -n $(TEST_WORKERS) --dist loadgroup
	$(MAKE) test-compiled

compiled: $(COMPILED)/.built ## a copy of the package with the scheduler compiled (mypyc)

# $(1): the build's dir; $(2): the C compiler's optimisation level (mypyc's MYPYC_OPT_LEVEL)
define MYPYC_BUILD
	rm -rf $(1) && mkdir -p $(1) && cp -r src/gpuyard $(1)/
	cd $(1) && MYPYC_OPT_LEVEL=$(2) $(abspath $(BIN))/mypyc --ignore-missing-imports \
	  $(MYPYC_MODULES) > mypyc.log 2>&1 || { tail -40 mypyc.log; exit 1; }
	rm -rf $(1)/build
	touch $(1)/.built
endef

$(COMPILED)/.built: $(BIN)/.installed-test $(shell find src/gpuyard -name '*.py')
	$(call MYPYC_BUILD,$(COMPILED),3)

# the same modules for the tests, unoptimised: what is compiled and how it behaves are the
# same, and it builds in 28 s instead of 64 s here, its tests run in 25 s instead of 12 s
# (the benchmarks use -O3 above)
$(COMPILED_TEST)/.built: $(BIN)/.installed-test $(shell find src/gpuyard -name '*.py')
	$(call MYPYC_BUILD,$(COMPILED_TEST),0)

bench-sim: compiled ## issue 4's Philly comparison (A and B) on the compiled build
	PYTHONPATH=$(COMPILED) $(BIN)/python bench/sim_quality.py

# the scheduler and simulator tests again, on the compiled build (not the one that runs the
# live controller and its API: the platform does not run from this build, `gpuyard up` says so)
test-compiled: $(COMPILED_TEST)/.built
	GPUYARD_COMPILED=1 PYTHONPATH=$(COMPILED_TEST) $(BIN)/pytest -q -p no:cacheprovider \
	  tests/scheduler tests/sim --deselect tests/sim/test_sim_vs_controller.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache
