#!/usr/bin/env bash
# Start/stop a real single-node Apache Kafka 4.x broker (KRaft, broker+controller) without Docker.
# Jars come from Maven Central into .cache/kafka/lib (reused when present).
#   scripts/kafka.sh start    -> prints BOOTSTRAP=127.0.0.1:<port>
#   scripts/kafka.sh stop     -> stops the broker and removes its data
#   scripts/kafka.sh restart  -> stops the process (keeps data, same ports) and starts it again
#   scripts/kafka.sh status
#   scripts/kafka.sh install  -> installs Java 17 and Maven (Debian) when missing and fetches the jars; prints KAFKA_LIB=
# Env: KAFKA_VERSION (default 4.1.1), KAFKA_PORT (default: a free port), KAFKA_STATE_DIR,
#      KAFKA_START_TIMEOUT seconds (default 90), KAFKA_CACHE_DIR, KAFKA_MAVEN_ARGS (extra mvn flags).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
KAFKA_VERSION="${KAFKA_VERSION:-4.1.1}"
LOG4J_VERSION="${LOG4J_VERSION:-2.24.3}"
SLF4J_VERSION="${SLF4J_VERSION:-2.0.16}"
CACHE="${KAFKA_CACHE_DIR:-$ROOT/.cache/kafka}"
LIB="$CACHE/lib-$KAFKA_VERSION-log4j$LOG4J_VERSION"
STATE="${KAFKA_STATE_DIR:-$CACHE/run}"
TIMEOUT="${KAFKA_START_TIMEOUT:-90}"

die() { echo "kafka.sh: ERROR: $*" >&2; exit 1; }
# shellcheck source=lib/install.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/install.sh"

free_port() {
  python3 - <<'PY'
import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()
PY
}

port_in_use() {
  python3 - "$1" <<'PY'
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # like the JVM: TIME_WAIT left by a stop is no conflict
try:
    s.bind(("127.0.0.1", int(sys.argv[1])))
except OSError:
    sys.exit(0)
sys.exit(1)
PY
}

check_java() {
  if ! command -v java >/dev/null 2>&1; then
    echo "kafka.sh: no Java on PATH; installing Debian's openjdk-17-jre-headless..." >&2
    apt_install /tmp/rounds-apt-java.log openjdk-17-jre-headless \
      || die "no Java found on PATH and it could not be installed. Kafka 4.x needs Java 17+ (set PATH/JAVA_HOME)."
    command -v java >/dev/null 2>&1 || die "openjdk-17-jre-headless installed but java is not on PATH."
  fi
  local v
  v=$(java -version 2>&1 | awk -F'"' '/version/ {print $2; exit}')
  local major="${v%%.*}"
  [ "${major:-0}" -ge 17 ] 2>/dev/null || die "Java $v found, but Kafka $KAFKA_VERSION needs Java 17+."
}

resolve_jars() {
  if [ -f "$LIB/.complete" ]; then return 0; fi
  if ! command -v mvn >/dev/null 2>&1; then
    echo "kafka.sh: Maven (mvn) not found; installing Debian's maven package (needed once to fetch the Kafka jars)..." >&2
    apt_install /tmp/rounds-apt-maven.log maven || die "Maven (mvn) not found and it could not be installed."
    command -v mvn >/dev/null 2>&1 || die "maven installed but mvn is not on PATH."
  fi
  mkdir -p "$CACHE"
  local pomdir="$CACHE/pom-$KAFKA_VERSION"
  mkdir -p "$pomdir"
  cat > "$pomdir/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>rounds</groupId><artifactId>kafka-runtime</artifactId><version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>$KAFKA_VERSION</version></dependency>
    <dependency><groupId>org.slf4j</groupId><artifactId>slf4j-api</artifactId><version>$SLF4J_VERSION</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-core</artifactId><version>$LOG4J_VERSION</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j2-impl</artifactId><version>$LOG4J_VERSION</version></dependency>
  </dependencies>
</project>
POM
  echo "kafka.sh: resolving Kafka $KAFKA_VERSION jars from Maven Central (first run only)..." >&2
  rm -rf "$LIB.tmp"
  # shellcheck disable=SC2086
  if ! timeout "${KAFKA_MAVEN_TIMEOUT:-900}" mvn ${KAFKA_MAVEN_ARGS:-} -B -q -f "$pomdir/pom.xml" dependency:copy-dependencies \
        -DincludeScope=runtime -DoutputDirectory="$LIB.tmp" >"$CACHE/mvn.log" 2>&1; then
    tail -n 20 "$CACHE/mvn.log" >&2 || true
    die "Maven could not resolve org.apache.kafka:kafka_2.13:$KAFKA_VERSION (log: $CACHE/mvn.log). Is Maven Central reachable (proxy, ~/.m2/settings.xml)?"
  fi
  ls "$LIB.tmp"/kafka_2.13-*.jar >/dev/null 2>&1 || die "Maven finished but no kafka_2.13 jar in $LIB.tmp"
  rm -rf "$LIB"; mv "$LIB.tmp" "$LIB"; touch "$LIB/.complete"
}

write_config() {
  local port="$1" cport="$2"
  mkdir -p "$STATE/data"
  cat > "$STATE/server.properties" <<PROPS
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$cport
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport
advertised.listeners=PLAINTEXT://127.0.0.1:$port
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
log.dirs=$STATE/data
num.partitions=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=false
# One node on a small machine: the controller's no-op metadata records and the broker's heartbeats to itself
# are what an idle broker spends its CPU on; a single node needs neither often.
metadata.max.idle.interval.ms=10000
broker.heartbeat.interval.ms=5000
broker.session.timeout.ms=30000
PROPS
  cat > "$STATE/log4j2.properties" <<'L4J'
status = error
appender.console.type = Console
appender.console.name = STDOUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.stdout.ref = STDOUT
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.state.name = state.change.logger
logger.state.level = WARN
L4J
  echo "$port" > "$STATE/port"
  echo "$cport" > "$STATE/cport"
}

running_pid() {
  [ -f "$STATE/pid" ] || return 1
  local pid; pid=$(cat "$STATE/pid")
  kill -0 "$pid" 2>/dev/null && echo "$pid"
}

launch() {
  local port; port=$(cat "$STATE/port")
  port_in_use "$port" && die "port $port is already in use by another process; free it or set KAFKA_PORT to another port."
  local cp="$LIB/*"
  # A development broker on a small machine: the serial collector and the client compiler cost less CPU to
  # start and to idle than the server defaults (benchmarks/README.md; KAFKA_HEAP_OPTS replaces all of it).
  JAVA_OPTS="${KAFKA_HEAP_OPTS:--Xms128m -Xmx768m -XX:+UseSerialGC -XX:TieredStopAtLevel=1}"
  # shellcheck disable=SC2086
  nohup java $JAVA_OPTS -Dlog4j2.configurationFile="$STATE/log4j2.properties" -cp "$cp" \
      kafka.Kafka "$STATE/server.properties" >>"$STATE/server.log" 2>&1 &
  echo $! > "$STATE/pid"
  local pid=$!
  local deadline=$(( $(date +%s) + TIMEOUT ))
  while :; do
    if ! kill -0 "$pid" 2>/dev/null; then
      tail -n 30 "$STATE/server.log" >&2
      die "the broker exited during start-up (log: $STATE/server.log)."
    fi
    grep -q "Kafka Server started" "$STATE/server.log" 2>/dev/null && break
    if [ "$(date +%s)" -ge "$deadline" ]; then
      tail -n 30 "$STATE/server.log" >&2
      kill "$pid" 2>/dev/null || true
      die "the broker did not report started within ${TIMEOUT}s (log: $STATE/server.log)."
    fi
    sleep 0.3
  done
  echo "BOOTSTRAP=127.0.0.1:$port"
}

cmd_start() {
  if pid=$(running_pid); then
    echo "BOOTSTRAP=127.0.0.1:$(cat "$STATE/port")"; return 0
  fi
  local t0; t0=$(date +%s.%N)
  local port="${KAFKA_PORT:-}"
  if [ -n "$port" ]; then
    port_in_use "$port" && die "KAFKA_PORT=$port is already in use; choose another port or unset KAFKA_PORT to pick a free one."
  else
    port=$(free_port)
  fi
  check_java
  resolve_jars
  rm -rf "$STATE"; mkdir -p "$STATE"
  local cport; cport=$(free_port)
  while [ "$cport" = "$port" ]; do cport=$(free_port); done
  write_config "$port" "$cport"
  local cluster_id
  # A cluster id is 16 random bytes in URL-safe base64. One in 64 begins with "-", which the storage tool's
  # argument parser takes for an option ("formatting the KRaft storage failed"); Kafka's own ids skip those.
  cluster_id=$(python3 -c 'import base64,uuid
while True:
    cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    if not cid.startswith("-"):
        break
print(cid)')
  if ! java -Dlog4j2.configurationFile="$STATE/log4j2.properties" -cp "$LIB/*" kafka.tools.StorageTool format \
        -t "$cluster_id" -c "$STATE/server.properties" --ignore-formatted >"$STATE/format.log" 2>&1; then
    cat "$STATE/format.log" >&2
    die "formatting the KRaft storage failed."
  fi
  launch
  local t1; t1=$(date +%s.%N)
  echo "kafka.sh: broker started in $(python3 -c "print(round($t1-$t0,1))")s" >&2
}

cmd_stop_process() {
  local pid
  if pid=$(running_pid); then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$STATE/pid"
}

case "${1:-}" in
  install) check_java; resolve_jars; echo "KAFKA_LIB=$LIB" ;;
  start) cmd_start ;;
  stop) cmd_stop_process; rm -rf "$STATE"; echo "kafka.sh: stopped" >&2 ;;
  restart)
    [ -f "$STATE/server.properties" ] || die "no broker state in $STATE; run start first."
    cmd_stop_process; launch ;;
  kill) pid=$(running_pid) && kill -9 "$pid"; rm -f "$STATE/pid" ;;
  status) if running_pid >/dev/null; then echo "BOOTSTRAP=127.0.0.1:$(cat "$STATE/port")"; else echo "stopped"; exit 3; fi ;;
  *) echo "usage: $0 start|stop|restart|kill|status" >&2; exit 2 ;;
esac
