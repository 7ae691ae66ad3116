# shellcheck shell=bash
# scripts/lib/cassandra.sh: a throwaway Apache Cassandra 5.0 node for the tests and the benchmarks, without Docker.
#
# Source it from bash. It defines functions and touches nothing until one is called. The node runs from the
# cassandra-all jars of Maven Central on the system's Java 17, with its own directory, its own loopback ports and no
# link to any other Cassandra; it is stopped by the PID this shell started.
#
#   fetch_cassandra        put cassandra-all and its runtime dependencies (~100 jars, ~67 MB) in
#                          $TETHER_CASSANDRA_CACHE/lib, with Maven (installed with apt when missing). A complete cache
#                          is reused: later runs skip Maven. Sets CASSANDRA_LIB.
#   start_cassandra DIR    fetch_cassandra, then write DIR/conf (cassandra.yaml, logback.xml) and start a one-node
#                          cluster whose data, commit log and logs live under DIR (which must not hold a node yet), and
#                          wait until it accepts CQL. Sets CASSANDRA_PID, CASSANDRA_DIR, CASSANDRA_PORT and
#                          CASSANDRA_HOST (127.0.0.1:PORT), CASSANDRA_USER and CASSANDRA_PASSWORD (the default
#                          superuser, cassandra/cassandra: the node requires password authentication) and
#                          CASSANDRA_DSN (the backend's cassandra:// format, keyspace-less).
#   stop_cassandra         stop what start_cassandra started: SIGTERM, then SIGKILL after 30s. Safe to call twice or
#                          when nothing was started.
#   clean_cassandra_dir DIR  stop a node an earlier, killed run left in DIR (only if DIR/cassandra.pid names a live
#                          java whose working directory is DIR) and remove DIR.
#
# The node is tuned for tests, not durability: commit log synced every 10s, 256-512 MB of heap, no snapshots on
# DROP or TRUNCATE.
#
# Environment, all optional:
#   TETHER_CASSANDRA_VERSION   cassandra-all version (5.0.9; 4.1.x does not run on Java 17)
#   TETHER_CASSANDRA_CACHE     jar cache (<repo>/var/cache/cassandra-$VERSION; <repo>/var is git-ignored)
#   TETHER_CASSANDRA_PORT      first CQL (native protocol) port to try (19042); the next free one is taken if busy
#   TETHER_CASSANDRA_STORAGE_PORT   first inter-node port to try (17000)
#   TETHER_CASSANDRA_JMX_PORT  first JMX port to try (17199)
#   TETHER_CASSANDRA_HEAP      -Xmx (512M); -Xms is half of it
#   TETHER_CASSANDRA_START_TIMEOUT   seconds to wait for the node to accept CQL (90)
#   TETHER_CASSANDRA_YAML      extra cassandra.yaml lines, appended last (so they win)
#   JAVA                       the java binary (java on PATH)

[[ -n "${_TETHER_CASSANDRA_SH:-}" ]] && return 0
_TETHER_CASSANDRA_SH=1
# shellcheck source=scripts/lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

: "${TETHER_CASSANDRA_VERSION:=5.0.9}"
: "${TETHER_CASSANDRA_CACHE:=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/var/cache/cassandra-$TETHER_CASSANDRA_VERSION}"
: "${TETHER_CASSANDRA_HEAP:=512M}"
: "${TETHER_CASSANDRA_START_TIMEOUT:=90}"

# ---------------------------------------------------------------------------------------------------------------
# Jars

fetch_cassandra() {
	local cache=$TETHER_CASSANDRA_CACHE v=$TETHER_CASSANDRA_VERSION t0
	CASSANDRA_LIB=$cache/lib
	# The marker is written last: a fetch that was interrupted is redone, never half used.
	if [[ -f "$cache/.complete" && -f "$CASSANDRA_LIB/cassandra-all-$v.jar" ]]; then
		return 0
	fi
	command -v mvn >/dev/null 2>&1 || apt_install_missing --no-recommends cassandra maven
	t0=$(now)
	log "cassandra: fetching cassandra-all $v and its dependencies from Maven Central into $CASSANDRA_LIB"
	rm -rf -- "$cache"
	mkdir -p "$cache"
	cat >"$cache/pom.xml" <<EOF
<?xml version="1.0" encoding="UTF-8"?>
<!-- Written by scripts/lib/cassandra.sh: only used to copy cassandra-all's runtime jars into lib/. -->
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>tether.local</groupId>
  <artifactId>cassandra-jars</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.cassandra</groupId>
      <artifactId>cassandra-all</artifactId>
      <version>$v</version>
    </dependency>
  </dependencies>
</project>
EOF
	if ! (cd "$cache" && mvn -q -B dependency:copy-dependencies -DoutputDirectory=lib -DincludeScope=runtime \
		>"$cache/mvn.log" 2>&1); then
		tail_file "$cache/mvn.log"
		die "cassandra: mvn dependency:copy-dependencies failed"
	fi
	[[ -f "$CASSANDRA_LIB/cassandra-all-$v.jar" ]] || die "cassandra: no cassandra-all-$v.jar in $CASSANDRA_LIB after mvn"
	touch "$cache/.complete"
	log "cassandra: fetched $(find "$CASSANDRA_LIB" -name '*.jar' | wc -l) jars ($(du -sh "$CASSANDRA_LIB" | cut -f1)) in $(since "$t0")s"
}

# ---------------------------------------------------------------------------------------------------------------
# The node

# _cassandra_jvm_opts DIR PORT JMX prints the JVM options, one per line.
_cassandra_jvm_opts() {
	local dir=$1 jmx=$2 heap=$TETHER_CASSANDRA_HEAP m
	local xms=$heap
	[[ "$heap" =~ ^([0-9]+)M$ ]] && xms=$((BASH_REMATCH[1] / 2))M
	printf '%s\n' \
		"-Xms$xms" "-Xmx$heap" -XX:+UseG1GC -Xss256k -XX:+HeapDumpOnOutOfMemoryError "-XX:HeapDumpPath=$dir/logs" \
		-Djdk.attach.allowAttachSelf=true -Djava.net.preferIPv4Stack=true -Dcassandra-foreground=yes \
		"-Dcassandra.config=file://$dir/conf/cassandra.yaml" "-Dcassandra.storagedir=$dir/data" \
		"-Dcassandra.logdir=$dir/logs" "-Dlogback.configurationFile=file://$dir/conf/logback.xml" \
		"-Dcassandra.jmx.local.port=$jmx" "-Dcom.sun.management.jmxremote.rmi.port=$jmx" -XX:+ExitOnOutOfMemoryError \
		-Dio.netty.tryReflectionSetAccessible=true \
		-Dcassandra.superuser_setup_delay_ms=0 -Dcassandra.skip_wait_for_gossip_to_settle=0 \
		-Dcassandra.ring_delay_ms=0
	# The Java 17 module flags of Cassandra's own conf/jvm17-server.options.
	for m in java.base/jdk.internal.misc java.management.rmi/com.sun.jmx.remote.internal.rmi \
		java.rmi/sun.rmi.registry java.rmi/sun.rmi.server java.sql/java.sql java.base/java.lang.ref \
		jdk.unsupported/sun.misc jdk.compiler/com.sun.tools.javac.file jdk.attach/sun.tools.attach; do
		printf '%s\n' "--add-exports=$m=ALL-UNNAMED"
	done
	for m in java.base/java.lang.module java.base/jdk.internal.loader java.base/jdk.internal.ref \
		java.base/jdk.internal.reflect java.base/jdk.internal.math java.base/jdk.internal.module \
		java.base/jdk.internal.util.jar jdk.management/com.sun.management.internal java.base/sun.nio.ch \
		java.base/java.io java.base/java.lang.reflect jdk.compiler/com.sun.tools.javac java.base/java.lang \
		java.base/java.util; do
		printf '%s\n' "--add-opens=$m=ALL-UNNAMED"
	done
}

# _cassandra_port_open PORT succeeds when something accepts TCP connections on 127.0.0.1:PORT.
_cassandra_port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

start_cassandra() {
	local dir=${1:?start_cassandra: DIR required}
	[[ -z "${CASSANDRA_PID:-}" ]] || die "start_cassandra: already running (pid $CASSANDRA_PID)"
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd)
	[[ ! -e "$dir/data" ]] || die "start_cassandra: $dir/data exists; run clean_cassandra_dir first"
	fetch_cassandra

	local java=${JAVA:-java} port storage jmx t0
	command -v "$java" >/dev/null 2>&1 || die "cassandra: no java (install openjdk-17-jre-headless)"
	port=$(free_port "${TETHER_CASSANDRA_PORT:-19042}")
	storage=$(free_port "${TETHER_CASSANDRA_STORAGE_PORT:-17000}")
	jmx=$(free_port "${TETHER_CASSANDRA_JMX_PORT:-17199}")
	mkdir -p "$dir/conf" "$dir/data" "$dir/logs"

	cat >"$dir/conf/cassandra.yaml" <<EOF
# Written by scripts/lib/cassandra.sh for a throwaway test node; rewritten on every start.
cluster_name: tether-test
num_tokens: 16
partitioner: org.apache.cassandra.dht.Murmur3Partitioner
endpoint_snitch: SimpleSnitch
seed_provider:
  - class_name: org.apache.cassandra.locator.SimpleSeedProvider
    parameters:
      - seeds: "127.0.0.1:$storage"
listen_address: 127.0.0.1
rpc_address: 127.0.0.1
storage_port: $storage
start_native_transport: true
native_transport_port: $port
authenticator: PasswordAuthenticator
authorizer: CassandraAuthorizer
role_manager: CassandraRoleManager
commitlog_sync: periodic
commitlog_sync_period: 10000ms
data_file_directories:
  - $dir/data/data
commitlog_directory: $dir/data/commitlog
saved_caches_directory: $dir/data/saved_caches
hints_directory: $dir/data/hints
cdc_raw_directory: $dir/data/cdc_raw
auto_snapshot: false
${TETHER_CASSANDRA_YAML:-}
EOF
	cat >"$dir/conf/logback.xml" <<EOF
<configuration>
  <appender name="FILE" class="ch.qos.logback.core.FileAppender">
    <file>$dir/logs/system.log</file>
    <encoder><pattern>%-5level [%thread] %date{ISO8601} %F:%L - %msg%n</pattern></encoder>
  </appender>
  <root level="INFO"><appender-ref ref="FILE"/></root>
</configuration>
EOF

	local opts=()
	mapfile -t opts < <(_cassandra_jvm_opts "$dir" "$jmx")
	t0=$(now)
	log "cassandra: starting on 127.0.0.1:$port (storage $storage, jmx $jmx) in $dir"
	# Its working directory is DIR, so that clean_cassandra_dir can tell it from an unrelated process.
	(cd "$dir" && exec "$java" "${opts[@]}" -cp "$dir/conf:$CASSANDRA_LIB/*" \
		org.apache.cassandra.service.CassandraDaemon) </dev/null >"$dir/logs/stdout.log" 2>&1 &
	CASSANDRA_PID=$!
	echo "$CASSANDRA_PID" >"$dir/cassandra.pid"
	CASSANDRA_DIR=$dir CASSANDRA_PORT=$port

	local deadline=$((SECONDS + TETHER_CASSANDRA_START_TIMEOUT))
	until _cassandra_port_open "$port"; do
		if ! pid_alive "$CASSANDRA_PID"; then
			tail_file "$dir/logs/system.log"
			tail_file "$dir/logs/stdout.log" 20
			CASSANDRA_PID=
			die "cassandra: the node exited during startup"
		fi
		if ((SECONDS >= deadline)); then
			tail_file "$dir/logs/system.log"
			die "cassandra: not accepting CQL on 127.0.0.1:$port after ${TETHER_CASSANDRA_START_TIMEOUT}s"
		fi
		sleep 0.2
	done
	# The default superuser is created once the node is up (superuser_setup_delay_ms=0); its log line says so.
	until grep -q "Created default superuser role" "$dir/logs/system.log" 2>/dev/null; do
		if ! pid_alive "$CASSANDRA_PID" || ((SECONDS >= deadline)); then
			tail_file "$dir/logs/system.log"
			die "cassandra: the default superuser was not created"
		fi
		sleep 0.2
	done
	CASSANDRA_HOST=127.0.0.1:$port CASSANDRA_USER=cassandra CASSANDRA_PASSWORD=cassandra
	CASSANDRA_DSN="cassandra://$CASSANDRA_USER:$CASSANDRA_PASSWORD@$CASSANDRA_HOST/"
	export CASSANDRA_PID CASSANDRA_DIR CASSANDRA_PORT CASSANDRA_HOST CASSANDRA_USER CASSANDRA_PASSWORD CASSANDRA_DSN
	log "cassandra: ready in $(since "$t0")s (pid $CASSANDRA_PID, $CASSANDRA_HOST)"
}

stop_cassandra() {
	[[ -n "${CASSANDRA_PID:-}" ]] || return 0
	log "cassandra: stopping pid $CASSANDRA_PID"
	# The daemon drains and flushes on SIGTERM (its shutdown hook), ~6s.
	stop_pid "$CASSANDRA_PID" cassandra 30
	rm -f "${CASSANDRA_DIR:?}/cassandra.pid"
	CASSANDRA_PID=
}

clean_cassandra_dir() {
	local dir=${1:?clean_cassandra_dir: DIR required} pid
	[[ -e "$dir" ]] || return 0
	if [[ -r "$dir/cassandra.pid" ]]; then
		pid=$(head -n 1 "$dir/cassandra.pid")
		if pid_alive "$pid" && pid_cwd_is "$pid" "$dir" &&
			[[ "$(readlink -f "/proc/$pid/exe" 2>/dev/null)" == */java ]]; then
			log "stopping cassandra left over from an earlier run (pid $pid, $dir)"
			stop_pid "$pid" cassandra 30
		fi
	fi
	rm -rf -- "$dir"
}
