#!/usr/bin/env bash
# scripts/stack.sh - tracedagent's observability stack WITHOUT Docker.
#
# Runs, on 127.0.0.1 only, the same four services as docker-compose.yml, with the
# same config files from collector/:
#
#   service        binary from                                    config                    ports
#   jaeger         Go build of Jaeger v2 (tools/jaeger/go.mod)   collector/jaeger.yaml     16686 UI/API, 14317/14318 OTLP in, 13134 health
#   otelcol        Go build by ocb (collector/builder.yaml)      collector/otelcol.yaml    4317/4318 OTLP in, 8889 metrics, 13133 health
#   alertmanager   Debian package prometheus-alertmanager        collector/alertmanager.yml 9093
#   prometheus     Debian package prometheus (+ promtool)        collector/prometheus.yml  9090
#   temporal       Go build of the Temporal CLI (go install)     flags below               7233 gRPC frontend, 7243 HTTP API/health, 7235 metrics
#                  `temporal server start-dev`: Temporal's development server, SQLite in .stack/data/temporal,
#                  no web UI (--headless); for tracedagent.temporal's durable runs (docs/temporal.md)
#
# Usage: scripts/stack.sh packages|build|up|down|restart|status|smoke   (or make stack-up, ...)
#   packages  install the pinned Debian packages (prometheus, promtool, alertmanager) if missing
#   build   install the Debian packages and build the Go binaries into the cache
#   up      build if needed, start whatever is not running, wait until all are healthy
#   down    stop everything this script started (TERM, then KILL after 15 s)
#   restart [SERVICE...]  stop the named services (default: all), then `up`
#   status  show each service's pid and health; exit 1 unless all are healthy
#   smoke   send a trace and metrics through the running stack and check they arrive
#   browser install Debian's Chromium if missing (the browser test drives it with Playwright)
#   jaeger-bin  print the path of the Jaeger binary `build` makes (the browser test runs its own)
#
# Where things go:
#   built binaries  ${XDG_CACHE_HOME:-~/.cache}/tracedagent/bin/, named by version, so a
#                   second `up` starts in seconds (the first build takes minutes)
#   runtime state   .stack/ in the repo (gitignored): run/*.pid, log/*.log, data/
#                   (Jaeger's Badger files live in .stack/data/jaeger: traces survive a restart)
set -euo pipefail

# ---------------------------------------------------------------------------
# Versions: every pin of the native stack, in one place.
# ---------------------------------------------------------------------------
JAEGER_VERSION=2.12.0                 # Jaeger v2 release ...
JAEGER_MODULE_VERSION=v1.75.0         # ... = this Go module version (tools/jaeger/go.mod must say the same)
OTELCOL_VERSION=0.165.0               # collector release: ocb and core components (collector/builder.yaml must say the same)
PROMETHEUS_DEB_VERSION=2.42.0+ds-5+deb12u1     # Debian 12 package `prometheus` (prometheus + promtool)
ALERTMANAGER_DEB_VERSION=0.25.0-1+b4           # Debian 12 package `prometheus-alertmanager`
TEMPORAL_CLI_VERSION=1.5.1            # github.com/temporalio/cli (its dev server: Temporal Server 1.29)

# ---------------------------------------------------------------------------
# Paths
# ---------------------------------------------------------------------------
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CONF="$ROOT/collector"
STACK="$ROOT/.stack"
RUN="$STACK/run"
LOGS="$STACK/log"
DATA="$STACK/data"
CACHE="${TRACEDAGENT_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/tracedagent}"
BIN="$CACHE/bin"

JAEGER_BIN="$BIN/jaeger-$JAEGER_VERSION"
# The collector's binary is keyed by version AND manifest content: adding a component
# to collector/builder.yaml gives a new binary even without a version bump.
OTELCOL_BIN="$BIN/otelcol-tracedagent-$OTELCOL_VERSION-$(sha256sum "$CONF/builder.yaml" | cut -c1-12)"
PROMETHEUS_BIN=/usr/bin/prometheus
ALERTMANAGER_BIN=/usr/bin/prometheus-alertmanager
TEMPORAL_BIN="$BIN/temporal-$TEMPORAL_CLI_VERSION"
# tracedagent's search attributes (tracedagent/_core/_names.py, TEMPORAL_SEARCH_ATTRIBUTES), NAME=TYPE:
# a tracedagent worker refuses to start on a namespace without them (docs/temporal.md).
TEMPORAL_SEARCH_ATTRIBUTES=(TracedAgentName=Keyword TracedAgentTraceId=Keyword TracedAgentConversationId=Keyword
                            TracedAgentStopReason=Keyword TracedAgentWaiting=Bool)
TEMPORAL_SEARCH_FLAGS=()
for pair in "${TEMPORAL_SEARCH_ATTRIBUTES[@]}"; do TEMPORAL_SEARCH_FLAGS+=(--search-attribute "$pair"); done

SERVICES=(jaeger otelcol alertmanager prometheus temporal)   # start order; stopped in reverse

# The collector's feature gates (docker-compose.yml passes the same): span metrics carry no
# resource attributes, so the series of a service are not tied to the process that sent
# its first span (collector/otelcol.yaml, span_metrics).
OTELCOL_FEATURE_GATES=(--feature-gates=connector.spanmetrics.excludeResourceMetrics)

log() { printf '[stack] %s\n' "$*" >&2; }
die() { printf '[stack] ERROR: %s\n' "$*" >&2; exit 1; }

# Health endpoint of each service (all loopback).
health_url() {
  case "$1" in
    jaeger)       echo "http://127.0.0.1:13134/" ;;
    otelcol)      echo "http://127.0.0.1:13133/" ;;
    alertmanager) echo "http://127.0.0.1:9093/-/ready" ;;
    prometheus)   echo "http://127.0.0.1:9090/-/ready" ;;
    # The HTTP API answers for the default namespace once the server can take workflows.
    temporal)     echo "http://127.0.0.1:7243/api/v1/namespaces/default" ;;
  esac
}

# TCP ports each service listens on (checked for conflicts before starting).
ports_of() {
  case "$1" in
    jaeger)       echo "16686 16685 14317 14318 13134 14269" ;;
    otelcol)      echo "4317 4318 8889 8888 13133" ;;
    alertmanager) echo "9093" ;;
    prometheus)   echo "9090" ;;
    temporal)     echo "7233 7243 7235" ;;
  esac
}

# The command line that starts each service, into the array CMD (run from $ROOT).
set_cmd() {
  case "$1" in
    jaeger)
      CMD=("$JAEGER_BIN" --config "$CONF/jaeger.yaml") ;;
    otelcol)
      CMD=("$OTELCOL_BIN" --config "$CONF/otelcol.yaml" "${OTELCOL_FEATURE_GATES[@]}") ;;
    alertmanager)
      CMD=("$ALERTMANAGER_BIN"
        --config.file="$CONF/alertmanager.yml"
        --storage.path="$DATA/alertmanager"
        --web.listen-address=127.0.0.1:9093
        --cluster.listen-address=)     # empty: no gossip port, a single instance
      ;;
    prometheus)
      CMD=("$PROMETHEUS_BIN"
        --config.file="$CONF/prometheus.yml"
        --storage.tsdb.path="$DATA/prometheus"
        --storage.tsdb.retention.time=7d
        --web.listen-address=127.0.0.1:9090
        --web.enable-lifecycle)        # POST /-/reload re-reads prometheus.yml and alerts.yml
      ;;
    temporal)
      # Every listener on 127.0.0.1 (its cluster-internal ports too: --ip is the bind address).
      CMD=("$TEMPORAL_BIN" server start-dev
        --ip 127.0.0.1 --port 7233 --http-port 7243 --metrics-port 7235
        --headless                      # no web UI: nothing listens on 8233
        --db-filename "$DATA/temporal/temporal.sqlite"   # workflows survive a restart
        "${TEMPORAL_SEARCH_FLAGS[@]}"  # registered in a new database (register_search_attributes: in any)
        --log-level warn)
      ;;
  esac
}

# ---------------------------------------------------------------------------
# Install and build
# ---------------------------------------------------------------------------

# Prometheus, promtool and Alertmanager from Debian. Debian's packages would start
# their own system services (on 9090/9093, with /etc configs); a temporary
# policy-rc.d forbids that during the install, and on systemd machines the units are
# disabled, so only our processes with our configs run.
install_debian_packages() {
  local have_prom have_am
  have_prom="$(dpkg-query -W -f='${Version}' prometheus 2>/dev/null || true)"
  have_am="$(dpkg-query -W -f='${Version}' prometheus-alertmanager 2>/dev/null || true)"
  # Installed at the pinned upstream version (any Debian revision of it, e.g. a security
  # rebuild)? Then nothing to do.
  if [[ $have_prom == "${PROMETHEUS_DEB_VERSION%%-*}"* && $have_am == "${ALERTMANAGER_DEB_VERSION%%-*}"* ]]; then
    return 0
  fi
  [[ $EUID -eq 0 ]] || die "need root to apt-get install prometheus=$PROMETHEUS_DEB_VERSION prometheus-alertmanager=$ALERTMANAGER_DEB_VERSION"
  log "installing Debian packages prometheus=$PROMETHEUS_DEB_VERSION prometheus-alertmanager=$ALERTMANAGER_DEB_VERSION"
  local policy=/usr/sbin/policy-rc.d made_policy=0
  if [[ ! -e $policy ]]; then
    printf '#!/bin/sh\n# temporary, from tracedagent scripts/stack.sh\nexit 101\n' >"$policy"
    chmod 755 "$policy"
    made_policy=1
    trap 'rm -f /usr/sbin/policy-rc.d' EXIT   # removed even if the install is interrupted
  fi
  local rc=0
  {
    apt-get update -qq &&
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      "prometheus=$PROMETHEUS_DEB_VERSION" "prometheus-alertmanager=$ALERTMANAGER_DEB_VERSION"
  } >"$CACHE/apt.log" 2>&1 || rc=$?
  if [[ $made_policy -eq 1 ]]; then rm -f "$policy"; trap - EXIT; fi
  if [[ $rc -ne 0 ]]; then
    tail -20 "$CACHE/apt.log" >&2
    die "apt-get install failed (log: $CACHE/apt.log). If Debian replaced the pinned version, set PROMETHEUS_DEB_VERSION / ALERTMANAGER_DEB_VERSION to what 'apt-cache policy prometheus prometheus-alertmanager' offers"
  fi
  if [[ -d /run/systemd/system ]]; then
    log "disabling the Debian services prometheus and prometheus-alertmanager (this stack runs its own)"
    systemctl disable --now prometheus.service prometheus-alertmanager.service >/dev/null 2>&1 || true
  fi
}

need_go() {
  command -v go >/dev/null || die "the Go toolchain is needed to build Jaeger and the collector (go on PATH)"
}

# The collector and Jaeger versions are also written in collector/builder.yaml and
# tools/jaeger/go.mod; refuse to build when they disagree with the pins above.
check_pins() {
  grep -q "^  version: $OTELCOL_VERSION\$" "$CONF/builder.yaml" ||
    die "collector/builder.yaml dist.version is not $OTELCOL_VERSION (OTELCOL_VERSION in $0)"
  grep -q "go.opentelemetry.io/collector/receiver/otlpreceiver v$OTELCOL_VERSION\$" "$CONF/builder.yaml" ||
    die "collector/builder.yaml components are not at v$OTELCOL_VERSION"
  grep -Eq "github.com/jaegertracing/jaeger $JAEGER_MODULE_VERSION( |\$)" "$ROOT/tools/jaeger/go.mod" ||
    die "tools/jaeger/go.mod does not require github.com/jaegertracing/jaeger $JAEGER_MODULE_VERSION"
}

# Jaeger: `go install github.com/jaegertracing/jaeger/cmd/jaeger@...` refuses a module
# whose go.mod has replace directives, so tools/jaeger/ is a tiny module (no Go code)
# that pins it with `go get -tool`, and we build the package inside that module.
build_jaeger() {
  [[ -x $JAEGER_BIN ]] && return 0
  need_go
  log "building Jaeger $JAEGER_VERSION (first time only: several minutes) ..."
  local start=$SECONDS
  (cd "$ROOT/tools/jaeger" &&
    go build -trimpath \
      -ldflags "-s -w -X github.com/jaegertracing/jaeger/internal/version.latestVersion=v$JAEGER_VERSION" \
      -o "$JAEGER_BIN.partial" github.com/jaegertracing/jaeger/cmd/jaeger) ||
    die "building Jaeger failed"
  mv "$JAEGER_BIN.partial" "$JAEGER_BIN"
  log "built $JAEGER_BIN in $((SECONDS - start)) s"
}

# Collector: the OpenTelemetry Collector Builder (ocb) generates a main package with
# the components listed in a manifest and compiles it. With no arguments, the main stack's
# collector (collector/builder.yaml); scripts/scale.sh passes its own manifest, release
# and binary path.
build_collector() {
  local manifest=${1:-$CONF/builder.yaml} version=${2:-$OTELCOL_VERSION} binary=${3:-$OTELCOL_BIN}
  [[ -x $binary ]] && return 0
  need_go
  local start=$SECONDS ocb="$BIN/ocb-$version" name
  name="$(sed -n 's/^  name: //p' "$manifest")"
  if [[ ! -x $ocb ]]; then
    log "installing ocb v$version ..."
    local gobin="$CACHE/build/ocb-gobin"
    mkdir -p "$gobin"
    GOBIN="$gobin" go install "go.opentelemetry.io/collector/cmd/builder@v$version" ||
      die "installing ocb failed"
    mv "$gobin/builder" "$ocb"
  fi
  log "building $name $version with ocb (first time only: several minutes) ..."
  local dir="$CACHE/build/$name-$version"
  rm -rf "$dir" && mkdir -p "$dir"
  # The manifest's output_path is relative: the sources and binary land in $dir.
  (cd "$dir" && "$ocb" --config "$manifest" --ldflags='-s -w') >"$dir.log" 2>&1 ||
    { tail -30 "$dir.log" >&2; die "ocb failed (log: $dir.log)"; }
  mv "$dir/$name/$name" "$binary"
  log "built $binary in $((SECONDS - start)) s"
}

# The Temporal CLI (its `server start-dev` is the development server): a plain `go install`
# of the pinned module version from the Go module proxy, so that a warm Go build cache makes
# it a link step (about 15 s) and a cold one a full build (several minutes).
build_temporal() {
  [[ -x $TEMPORAL_BIN ]] && return 0
  need_go
  log "building the Temporal CLI $TEMPORAL_CLI_VERSION (first time only) ..."
  local start=$SECONDS gobin="$CACHE/build/temporal-gobin"
  mkdir -p "$gobin"
  GOBIN="$gobin" go install "github.com/temporalio/cli/cmd/temporal@v$TEMPORAL_CLI_VERSION" ||
    die "building the Temporal CLI failed"
  mv "$gobin/temporal" "$TEMPORAL_BIN"
  log "built $TEMPORAL_BIN in $((SECONDS - start)) s"
}

# Chromium from Debian for tests/stack/test_jaeger_ui.py (Playwright drives it; it never
# downloads a browser of its own). Not pinned: Debian ships Chromium's security releases as
# new versions and removes the old ones, so a pin would break the install within weeks.
install_browser() {
  [[ -x /usr/bin/chromium ]] && return 0
  [[ $EUID -eq 0 ]] || die "need root to apt-get install chromium"
  log "installing Debian's chromium ..."
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium; } \
    >"$CACHE/apt-chromium.log" 2>&1 || { tail -20 "$CACHE/apt-chromium.log" >&2; die "apt-get install chromium failed"; }
}

cmd_build() {
  mkdir -p "$BIN" "$CACHE/build"
  check_pins
  install_debian_packages
  install_browser
  # One after the other: on 2 cores, building both at once measured no faster.
  build_jaeger
  build_collector
  build_temporal
  log "binaries ready in $BIN"
}

# ---------------------------------------------------------------------------
# Processes
# ---------------------------------------------------------------------------

# A pid file holds two lines: the pid, and the binary that was started. The binary
# is recorded because ${CMD[0]} is recomputed from the pins and builder.yaml's hash:
# after either changes, it names a new binary while the old one is still running.
pid_file() { echo "$RUN/$1.pid"; }

# The program ${CMD[@]} ends up running: ${CMD[0]}, unless set_cmd started it through a
# wrapper that execs it (scripts/scale.sh does) and named it in CMD_EXEC.
cmd_binary() { echo "${CMD_EXEC:-${CMD[0]}}"; }

# The binary the pid file says was started; for an older, one-line pid file, today's
# ${CMD[0]}, the only thing left to check against.
started_binary() {
  local f pid binary=""
  f="$(pid_file "$1")"
  [[ -f $f ]] && { read -r pid || true; read -r binary || true; } <"$f"
  if [[ -z $binary ]]; then set_cmd "$1"; binary="$(cmd_binary)"; fi
  echo "$binary"
}

# Prints the pid if the service's pid file names a live process running the binary
# that was started (so a stale pid file reused by another program is ignored).
running_pid() {
  local f pid="" argv0
  f="$(pid_file "$1")"
  [[ -f $f ]] || return 1
  read -r pid <"$f" || true
  [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null || return 1
  argv0="$(head -z -n 1 "/proc/$pid/cmdline" 2>/dev/null | tr -d '\0')"
  [[ $argv0 == "$(started_binary "$1")" ]] || return 1
  echo "$pid"
}

# The Jaeger UI build beside the repository (../shared/jaeger-ui/build, or $TRACEDAGENT_SHARED's),
# which the natively built Jaeger then serves: its Go module carries no UI pages. Empty when
# there is none (Jaeger then serves a placeholder page; its HTTP API works either way).
jaeger_ui_assets() {
  local build="${TRACEDAGENT_SHARED:-$ROOT/../shared}/jaeger-ui/build"
  [[ -f $build/index.html ]] && (cd "$build" && pwd) || true
}

healthy() { curl -fsS -o /dev/null --max-time 2 "$(health_url "$1")" 2>/dev/null; }

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# Fails if a port of a service that is not running yet is taken by another process.
check_ports_free() {
  local name=$1 port
  running_pid "$name" >/dev/null && return 0
  for port in $(ports_of "$name"); do
    if port_in_use "$port"; then
      ss -ltnp "sport = :$port" 2>/dev/null | tail -n +2 >&2 || true
      die "port 127.0.0.1:$port (for $name) is taken by another process; stop it first"
    fi
  done
}

start_service() {
  local name=$1 pid
  set_cmd "$name"
  if pid="$(running_pid "$name")"; then
    local binary
    binary="$(started_binary "$name")"
    if [[ $binary == "$(cmd_binary)" ]]; then
      log "$name already running (pid $pid)"
    else
      log "$name already running (pid $pid) from $binary, not $(cmd_binary): $0 restart $name switches"
    fi
    return 0
  fi
  # setsid: the service gets its own session, so it outlives this script and a
  # Ctrl-C in the terminal that ran `make stack-up` does not reach it.
  (cd "$ROOT" && JAEGER_DATA_DIR="$DATA/jaeger" JAEGER_UI_ASSETS="$(jaeger_ui_assets)" \
     exec setsid "${CMD[@]}" </dev/null >>"$LOGS/$name.log" 2>&1) &
  printf '%s\n%s\n' "$!" "$(cmd_binary)" >"$(pid_file "$name")"
  log "started $name (pid $!, log $LOGS/$name.log)"
}

# Alive, whatever it is running yet: right after start_service the pid may still be the
# subshell or setsid on its way to exec'ing the service, which running_pid (it checks the
# binary, against a reused pid) would take for a service that died.
alive() {
  local f pid=""
  f="$(pid_file "$1")"
  [[ -f $f ]] && read -r pid <"$f" && [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null &&
    ! grep -q '^State:.*zombie' "/proc/$pid/status" 2>/dev/null  # exited, not yet reaped
}

wait_healthy() {
  local name=$1 deadline=$((SECONDS + ${STACK_HEALTH_TIMEOUT:-60}))
  until healthy "$name"; do
    if ! alive "$name"; then
      tail -20 "$LOGS/$name.log" >&2
      die "$name exited during startup (log: $LOGS/$name.log)"
    fi
    ((SECONDS < deadline)) || die "$name not healthy at $(health_url "$name") after ${STACK_HEALTH_TIMEOUT:-60} s (log: $LOGS/$name.log)"
    sleep 0.3
  done
  log "$name healthy"
}

stop_service() {
  local name=$1 pid
  if ! pid="$(running_pid "$name")"; then
    rm -f "$(pid_file "$name")"
    return 0
  fi
  kill -TERM "$pid" 2>/dev/null || true
  local deadline=$((SECONDS + 15))
  while kill -0 "$pid" 2>/dev/null; do
    if ((SECONDS >= deadline)); then
      log "$name (pid $pid) ignored TERM for 15 s; killing"
      kill -KILL "$pid" 2>/dev/null || true
      break
    fi
    sleep 0.2
  done
  rm -f "$(pid_file "$name")"
  log "stopped $name (pid $pid)"
}

# start-dev's --search-attribute registers them only in a new database: a dev server whose SQLite
# an older stack.sh made gets them here (`create` of one registered with the same type succeeds).
register_search_attributes() {
  local args=() pair
  for pair in "${TEMPORAL_SEARCH_ATTRIBUTES[@]}"; do args+=(--name "${pair%%=*}" --type "${pair#*=}"); done
  "$TEMPORAL_BIN" operator search-attribute create --address 127.0.0.1:7233 "${args[@]}" >/dev/null ||
    die "could not register tracedagent's search attributes on Temporal (log: $LOGS/temporal.log)"
}

cmd_up() {
  local start=$SECONDS
  cmd_build
  mkdir -p "$RUN" "$LOGS" "$DATA/jaeger/keys" "$DATA/jaeger/values" "$DATA/prometheus" "$DATA/alertmanager" \
    "$DATA/temporal"
  local name
  for name in "${SERVICES[@]}"; do
    check_ports_free "$name"   # all checked before anything starts
  done
  for name in "${SERVICES[@]}"; do
    start_service "$name"
    wait_healthy "$name"
  done
  register_search_attributes
  log "stack up in $((SECONDS - start)) s:"
  log "  OTLP gRPC 127.0.0.1:4317, OTLP HTTP 127.0.0.1:4318 (collector)"
  log "  Jaeger http://127.0.0.1:16686  Prometheus http://127.0.0.1:9090  Alertmanager http://127.0.0.1:9093"
  log "  Temporal 127.0.0.1:7233 (gRPC frontend; HTTP API http://127.0.0.1:7243)"
}

cmd_down() {
  local i
  for ((i = ${#SERVICES[@]} - 1; i >= 0; i--)); do
    stop_service "${SERVICES[i]}"
  done
}

cmd_restart() {
  local name
  if [[ $# -eq 0 ]]; then
    cmd_down
  else
    for name in "$@"; do
      [[ " ${SERVICES[*]} " == *" $name "* ]] || die "unknown service '$name' (one of: ${SERVICES[*]})"
      stop_service "$name"
    done
  fi
  cmd_up
}

cmd_status() {
  local name pid ok=0
  printf '%-13s %-8s %-8s %s\n' SERVICE PID HEALTH URL
  for name in "${SERVICES[@]}"; do
    if pid="$(running_pid "$name")"; then
      if healthy "$name"; then
        printf '%-13s %-8s %-8s %s\n' "$name" "$pid" ok "$(health_url "$name")"
      else
        printf '%-13s %-8s %-8s %s\n' "$name" "$pid" FAILING "$(health_url "$name")"; ok=1
      fi
    else
      printf '%-13s %-8s %-8s %s\n' "$name" - stopped "$(health_url "$name")"; ok=1
    fi
  done
  return $ok
}

cmd_smoke() {
  cmd_status >/dev/null || die "the stack is not (fully) up; run: make stack-up"
  python3 "$ROOT/scripts/stack_smoke.py"
}

# Sourced (scripts/scale.sh reuses the functions above): define, do not dispatch.
[[ ${BASH_SOURCE[0]} == "$0" ]] || return 0

case "${1:-}" in
  packages) mkdir -p "$CACHE"; install_debian_packages ;;
  build)  cmd_build ;;
  up)     cmd_up ;;
  down)   cmd_down ;;
  restart) shift; cmd_restart "$@" ;;
  status) cmd_status ;;
  smoke)  cmd_smoke ;;
  browser) mkdir -p "$CACHE"; install_browser ;;
  jaeger-bin) echo "$JAEGER_BIN" ;;
  *) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0" >&2; exit 2 ;;
esac
