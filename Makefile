# tracedagent - top-level tasks.
#
# Observability stack without Docker (see collector/README.md); the logic lives in
# scripts/stack.sh, these targets only name it.
.PHONY: stack-build stack-up stack-down stack-status stack-smoke alerts-test compose-check

stack-build:   ## install Prometheus/Alertmanager (apt) and build+cache Jaeger and the collector
	scripts/stack.sh build

stack-up:      ## start the stack on 127.0.0.1 and wait until every service is healthy
	scripts/stack.sh up

stack-down:    ## stop every process stack-up started
	scripts/stack.sh down

stack-status:  ## pid and health of each service (exit 1 unless all are healthy)
	scripts/stack.sh status

stack-smoke:   ## send a trace and metrics through the running stack and check they arrive
	scripts/stack.sh smoke

PROMTOOL ?= promtool

alerts-test:   ## validate the Prometheus config and rules, then run the rules' unit tests
	scripts/stack.sh packages
	$(PROMTOOL) check config collector/prometheus.yml
	$(PROMTOOL) check rules collector/alerts.yml
	$(PROMTOOL) test rules collector/alerts_test.yml

compose-check: ## static checks of docker-compose.yml (no Docker needed): pins, paths, 127.0.0.1 ports
	python3 scripts/check_compose.py
