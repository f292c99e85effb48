#!/usr/bin/env bash
# scripts/scale.sh - the scale profile WITHOUT Docker: tail sampling behind a trace-id load
# balancer, Kafka as a buffer, Jaeger v2 reading from Kafka into Cassandra (docs/scale.md).
#
#   service          runs                                    config (collector/scale/)        ports (127.0.0.x)
#   cassandra        Cassandra 5.0 jars (Maven), Java 17     cassandra.yaml                   24042 CQL, 24700, 24199 JMX
#   kafka            Kafka 4.1 jars (Maven), KRaft           kafka.properties                 24092, 24093 controller
#   jaeger-ingester  Jaeger v2 binary: Kafka -> Cassandra    jaeger-ingester.yaml             24136 health, 24883
#   jaeger-query     Jaeger v2 binary: UI/API on Cassandra   jaeger-query.yaml                24686 UI/API, 24685, 24137
#   sampler-1, -2    Jaeger v2 binary: tail_sampling->Kafka  sampler.yaml                     127.0.0.2/.3:24417 OTLP, 24134/24135 health
#   membership       this script: which samplers are alive   (writes the gateway's hosts file)
#   gateway          collector built from scale/builder.yaml otelcol.yaml + gateway.yaml     24317/24318 OTLP in, 24889 metrics, 24133 health
#
# The gateway's load balancer finds the samplers by DNS (`samplers.scale`, one address per
# sampler, same port). Natively that name lives in a hosts file bind-mounted over /etc/hosts
# in the gateway's own mount namespace (unshare; nothing else on the machine sees it), and
# the membership loop lists in it only the samplers whose health check answers, as a
# Kubernetes headless service or compose's DNS would.
#
# Usage: scripts/scale.sh build|up|down|restart [SERVICE...]|stop SERVICE...|kill SERVICE...|status
#   build    fetch the Kafka and Cassandra jars with mvn, build Jaeger and the gateway
#   up       build if needed, start whatever is not running, wait until all are healthy
#   down     stop everything this script started (TERM, then KILL after 15 s)
#   restart [SERVICE...]  stop the named services (default: all), then `up`
#   stop SERVICE...       stop the named services gracefully (TERM); `up` starts them again
#   kill SERVICE...       SIGKILL the named services (a crash, for the failure tests)
#   status   show each service's pid and health; exit 1 unless all are healthy
#
# Where things go (the main stack, scripts/stack.sh, is never touched):
#   binaries and jars  ${XDG_CACHE_HOME:-~/.cache}/tracedagent/{bin,lib}/, named by version
#   runtime state      ${TRACEDAGENT_SCALE_DIR:-~/.cache/tracedagent/scale}/ run/ log/ data/
#
# Knobs, read by the configs when the services start (see docs/scale.md):
#   SCALE_ANSWERED_PERCENT (10)  SCALE_SLOW_RUN_MS (60000)  SCALE_DECISION_WAIT (10s)
set -euo pipefail

# The main stack's functions and pins (Jaeger's version, the Go builds, process handling).
# shellcheck source=scripts/stack.sh
source "$(dirname "${BASH_SOURCE[0]}")/stack.sh"

# ---------------------------------------------------------------------------
# Versions: the scale profile's pins (Jaeger's is stack.sh's JAEGER_VERSION).
# ---------------------------------------------------------------------------
KAFKA_VERSION=4.1.1                 # org.apache.kafka:kafka_2.13 (collector/scale/maven/kafka.pom.xml says the same)
CASSANDRA_VERSION=5.0.6             # org.apache.cassandra:cassandra-all (maven/cassandra.pom.xml says the same)
SCALE_OTELCOL_VERSION=0.161.0       # the gateway's collector release (collector/scale/builder.yaml says the same)
KAFKA_CLUSTER_ID=dHJhY2VkYWdlbnQtc2NhbGU   # fixed: the data dir is formatted once, for this id

SCALE_CONF="$CONF/scale"
STACK="${TRACEDAGENT_SCALE_DIR:-$CACHE/scale}"
RUN="$STACK/run"
LOGS="$STACK/log"
DATA="$STACK/data"
LIB="$CACHE/lib"

pom_key() { sha256sum "$SCALE_CONF/maven/$1.pom.xml" | cut -c1-12; }
KAFKA_LIB="$LIB/kafka-$KAFKA_VERSION-$(pom_key kafka)"
CASSANDRA_LIB="$LIB/cassandra-$CASSANDRA_VERSION-$(pom_key cassandra)"
GATEWAY_BIN="$BIN/otelcol-tracedagent-scale-$SCALE_OTELCOL_VERSION-$(sha256sum "$SCALE_CONF/builder.yaml" | cut -c1-12)"
JAVA="$(readlink -f "$(command -v java 2>/dev/null || echo /usr/bin/java)")"

SAMPLERS_HOST=samplers.scale
SAMPLER_ADDRS=(127.0.0.2 127.0.0.3)        # sampler-1, sampler-2: one loopback address each
HOSTS_FILE="$RUN/gateway-hosts"            # the gateway's /etc/hosts
BEAT_FILE="$RUN/membership.beat"           # touched by every round of the membership loop

SERVICES=(cassandra kafka jaeger-ingester jaeger-query sampler-1 sampler-2 membership gateway)
export STACK_HEALTH_TIMEOUT="${STACK_HEALTH_TIMEOUT:-180}"   # Cassandra's first start takes a minute

log() { printf '[scale] %s\n' "$*" >&2; }
die() { printf '[scale] ERROR: %s\n' "$*" >&2; exit 1; }

health_url() {
  case "$1" in
    cassandra)       echo "tcp://127.0.0.1:24042 (CQL)" ;;
    kafka)           echo "tcp://127.0.0.1:24092" ;;
    jaeger-ingester) echo "http://127.0.0.1:24136/" ;;
    jaeger-query)    echo "http://127.0.0.1:24137/" ;;
    sampler-1)       echo "http://127.0.0.1:24134/" ;;
    sampler-2)       echo "http://127.0.0.1:24135/" ;;
    membership)      echo "file://$BEAT_FILE" ;;
    gateway)         echo "http://127.0.0.1:24133/" ;;
  esac
}

ports_of() {
  case "$1" in
    cassandra)       echo "24042 24700 24199" ;;
    kafka)           echo "24092 24093" ;;
    jaeger-ingester) echo "24136 24883" ;;
    jaeger-query)    echo "24686 24685 24137 24884" ;;
    sampler-1)       echo "24134 24881" ;;
    sampler-2)       echo "24135 24882" ;;
    membership)      echo "" ;;
    gateway)         echo "24317 24318 24133 24888 24889" ;;
  esac
}

# Kafka and Cassandra have no HTTP health check: their client port accepting connections is
# the last step of their startup. The membership loop is healthy while it keeps beating.
healthy() {
  case "$1" in
    cassandra)  port_in_use 24042 ;;
    kafka)      port_in_use 24092 ;;
    membership) [[ -f $BEAT_FILE ]] && (($(date +%s) - $(stat -c %Y "$BEAT_FILE") < 5)) ;;
    *)          curl -fsS -o /dev/null --max-time 2 "$(health_url "$1")" 2>/dev/null ;;
  esac
}

set_cmd() {
  CMD_EXEC=""
  case "$1" in
    cassandra)
      local jvm
      mapfile -t jvm < <(grep -v '^\s*\(#\|$\)' "$SCALE_CONF/cassandra-jvm17.options")
      CMD=("$JAVA" "${jvm[@]}"
        -Dcassandra.config="file://$SCALE_CONF/cassandra.yaml"
        -Dcassandra.storagedir="$DATA/cassandra"
        -Dcassandra.jmx.local.port=24199
        -Dlogback.configurationFile="$SCALE_CONF/cassandra-logback.xml"
        -cp "$CASSANDRA_LIB/*" org.apache.cassandra.service.CassandraDaemon) ;;
    kafka)
      CMD=("$JAVA" -Xms256M -Xmx512M -XX:+UseG1GC
        -Dlog4j2.configurationFile="$SCALE_CONF/kafka-log4j2.yaml"
        -cp "$KAFKA_LIB/*" kafka.Kafka "$RUN/kafka.properties") ;;
    jaeger-ingester)
      CMD=("$JAEGER_BIN" --config "$SCALE_CONF/jaeger-ingester.yaml") ;;
    jaeger-query)
      CMD=("$JAEGER_BIN" --config "$SCALE_CONF/jaeger-query.yaml") ;;
    sampler-1|sampler-2)
      local i=${1#sampler-}
      # Read by sampler.yaml; start_service's subshell inherits them.
      export SAMPLER_NAME="$1" SAMPLER_OTLP_ENDPOINT="${SAMPLER_ADDRS[i - 1]}:24417"
      export SAMPLER_HEALTH_PORT=$((24133 + i)) SAMPLER_METRICS_PORT=$((24880 + i))
      CMD=("$JAEGER_BIN" --config "$SCALE_CONF/sampler.yaml") ;;
    membership)
      CMD=(/bin/bash "$ROOT/scripts/scale.sh" membership) ;;
    gateway)
      # A private mount namespace in which /etc/hosts is the membership loop's file.
      CMD=(unshare --mount --propagation private /bin/sh -c
        'mount --bind "$1" /etc/hosts && shift && exec "$@"' sh "$HOSTS_FILE"
        "$GATEWAY_BIN" --config "$CONF/otelcol.yaml" --config "$SCALE_CONF/gateway.yaml"
        "${OTELCOL_FEATURE_GATES[@]}")
      CMD_EXEC="$GATEWAY_BIN" ;;
  esac
}

# ---------------------------------------------------------------------------
# Build: jars from Maven Central, Go binaries
# ---------------------------------------------------------------------------

check_scale_pins() {
  grep -q "<version>$KAFKA_VERSION</version>" "$SCALE_CONF/maven/kafka.pom.xml" ||
    die "collector/scale/maven/kafka.pom.xml does not pin kafka_2.13 $KAFKA_VERSION"
  grep -q "<version>$CASSANDRA_VERSION</version>" "$SCALE_CONF/maven/cassandra.pom.xml" ||
    die "collector/scale/maven/cassandra.pom.xml does not pin cassandra-all $CASSANDRA_VERSION"
  grep -q "^  version: $SCALE_OTELCOL_VERSION\$" "$SCALE_CONF/builder.yaml" ||
    die "collector/scale/builder.yaml dist.version is not $SCALE_OTELCOL_VERSION"
}

need_java_and_maven() {
  local major
  major="$("$JAVA" -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1)"
  [[ ${major:-0} -ge 17 ]] || die "Java 17 or newer is needed for Kafka and Cassandra (found: ${major:-none} at $JAVA)"
  command -v mvn >/dev/null && return 0
  [[ $EUID -eq 0 ]] || die "Maven (mvn) is needed to fetch the Kafka and Cassandra jars: apt-get install maven"
  log "installing Maven (Debian package maven) ..."
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends maven; } \
    >"$CACHE/apt-maven.log" 2>&1 || die "apt-get install maven failed (log: $CACHE/apt-maven.log)"
}

# The jars of one POM (collector/scale/maven/NAME.pom.xml) and their runtime dependencies,
# into a cache directory keyed by the version and the POM's content.
fetch_jars() {
  local name=$1 dir=$2
  [[ -f $dir/.complete ]] && return 0
  log "fetching the $name jars from Maven Central (first time only) ..."
  rm -rf "$dir.partial"
  mvn -q -B -f "$SCALE_CONF/maven/$name.pom.xml" dependency:copy-dependencies \
    -DincludeScope=runtime -DoutputDirectory="$dir.partial" >"$dir.log" 2>&1 ||
    { tail -20 "$dir.log" >&2; die "mvn failed for $name (log: $dir.log)"; }
  touch "$dir.partial/.complete"
  rm -rf "$dir" && mv "$dir.partial" "$dir"
}

cmd_build() {
  mkdir -p "$BIN" "$LIB" "$CACHE/build"
  check_pins
  check_scale_pins
  need_java_and_maven
  fetch_jars kafka "$KAFKA_LIB"
  fetch_jars cassandra "$CASSANDRA_LIB"
  build_jaeger
  build_collector "$SCALE_CONF/builder.yaml" "$SCALE_OTELCOL_VERSION" "$GATEWAY_BIN"
  log "ready: jars in $LIB, binaries in $BIN"
}

# ---------------------------------------------------------------------------
# Processes (start/stop/status come from stack.sh)
# ---------------------------------------------------------------------------

# Kafka's data directory is formatted once (KRaft writes its cluster id and metadata log).
prepare_kafka() {
  { cat "$SCALE_CONF/kafka.properties"; echo "log.dirs=$DATA/kafka"; } >"$RUN/kafka.properties"
  [[ -f $DATA/kafka/meta.properties ]] && return 0
  log "formatting Kafka's data directory $DATA/kafka"
  "$JAVA" -Xmx256M -Dlog4j2.configurationFile="$SCALE_CONF/kafka-log4j2.yaml" -cp "$KAFKA_LIB/*" \
    kafka.tools.StorageTool format -t "$KAFKA_CLUSTER_ID" -c "$RUN/kafka.properties" \
    >>"$LOGS/kafka.log" 2>&1 || die "formatting Kafka's storage failed (log: $LOGS/kafka.log)"
}

# The hosts file the gateway resolves samplers.scale in; rewritten only when it changes
# (in place: it is bind-mounted, so its inode must stay the same).
write_hosts() {
  local content addr
  content="127.0.0.1 localhost"$'\n'"::1 localhost"$'\n'
  for addr in "$@"; do content+="$addr $SAMPLERS_HOST"$'\n'; done
  [[ -f $HOSTS_FILE && "$(cat "$HOSTS_FILE")"$'\n' == "$content" ]] && return 0
  printf '%s' "$content" >"$HOSTS_FILE"
}

# Every second: the samplers whose health check answers are the ones the gateway resolves.
# With none alive, all are listed (fail open): the balancer's queue then holds the spans
# until one comes back, rather than having no route at all.
cmd_membership() {
  local i alive
  while true; do
    alive=()
    for i in "${!SAMPLER_ADDRS[@]}"; do
      healthy "sampler-$((i + 1))" && alive+=("${SAMPLER_ADDRS[i]}")
    done
    ((${#alive[@]})) || alive=("${SAMPLER_ADDRS[@]}")
    write_hosts "${alive[@]}"
    touch "$BEAT_FILE"
    sleep 1
  done
}

cmd_up() {
  local start=$SECONDS name
  cmd_build
  mkdir -p "$RUN" "$LOGS" "$DATA/cassandra" "$DATA/kafka"
  for name in "${SERVICES[@]}"; do
    check_ports_free "$name"   # all checked before anything starts
  done
  prepare_kafka
  [[ -f $HOSTS_FILE ]] || write_hosts "${SAMPLER_ADDRS[@]}"
  for name in "${SERVICES[@]}"; do
    start_service "$name"
    wait_healthy "$name"
  done
  log "scale stack up in $((SECONDS - start)) s:"
  log "  OTLP gRPC 127.0.0.1:24317, OTLP HTTP 127.0.0.1:24318 (gateway; span metrics on :24889/metrics)"
  log "  Jaeger (Cassandra) http://127.0.0.1:24686"
}

check_services() {
  local name
  for name in "$@"; do
    [[ " ${SERVICES[*]} " == *" $name "* ]] || die "unknown service '$name' (one of: ${SERVICES[*]})"
  done
}

cmd_stop() {
  local name
  check_services "$@"
  for name in "$@"; do stop_service "$name"; done
}

cmd_kill() {
  local name pid
  check_services "$@"
  for name in "$@"; do
    if pid="$(running_pid "$name")"; then
      kill -KILL "$pid"
      log "killed $name (pid $pid)"
    fi
  done
}

case "${1:-}" in
  build)      cmd_build ;;
  up)         cmd_up ;;
  down)       cmd_down ;;
  restart)    shift; cmd_restart "$@" ;;
  stop)       shift; cmd_stop "$@" ;;
  kill)       shift; cmd_kill "$@" ;;
  status)     cmd_status ;;
  membership) cmd_membership ;;
  *) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0" >&2; exit 2 ;;
esac
