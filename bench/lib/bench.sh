# shellcheck shell=bash
# bench/lib/bench.sh: what the benchmarks' run.sh scripts (bench/*/run.sh) share: their common options, the
# re-run as root, the EXIT trap, the leftovers of a killed run, config templates, start-up waits and the facts a
# report quotes. Source it from bash after scripts/lib/databases.sh (it uses _db_bin); it only defines functions.

[[ -n "${_TETHER_BENCH_SH:-}" ]] && return 0
_TETHER_BENCH_SH=1

# shellcheck source=scripts/lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib/common.sh"

# bench_usage SCRIPT prints SCRIPT's header comment (from its second line to `set -euo`), without the "# ".
bench_usage() {
	sed -n '2,/^set -euo/p' "$1" | sed '$d; s/^# \{0,1\}//'
}

# bench_parse_args SCRIPT [--web] -- ARG... parses the options every benchmark takes and sets:
#   QUICK, WRITE    1 or 0, from --quick / --write, else from BENCH_QUICK / BENCH_WRITE (0)
#   QUICK_ARGS      (--quick) in quick mode, else empty: what the script passes on to its bench.php
#   ARGS            every ARG, as given (for the report's command line and a re-run as root)
#   BENCH_ARGS      the ARGs after --, for bench.php
# With --web it also takes --serve (SERVE=1, else 0) and --servers LIST (SERVERS, default apache,nginx; each apache
# or nginx). -h/--help prints SCRIPT's header and exits 0; any other argument, and --write with --quick, die.
# shellcheck disable=SC2034 # the variables it sets are the scripts'
bench_parse_args() {
	local script=$1 web=0 s
	shift
	if [[ "$1" == --web ]]; then
		web=1
		shift
	fi
	[[ "$1" == -- ]] || die "bench_parse_args: want SCRIPT [--web] -- ARG..."
	shift
	QUICK=${BENCH_QUICK:-0}
	WRITE=${BENCH_WRITE:-0}
	SERVERS=apache,nginx
	SERVE=0
	ARGS=("$@")
	BENCH_ARGS=()
	while (($#)); do
		case $1 in
		--quick) QUICK=1 ;;
		--write) WRITE=1 ;;
		--serve | --servers)
			((web)) || die "unknown argument $1 (see --help)"
			if [[ "$1" == --serve ]]; then
				SERVE=1
			else
				SERVERS=${2:?--servers needs a list}
				shift
			fi
			;;
		-h | --help)
			bench_usage "$script"
			exit 0
			;;
		--)
			shift
			BENCH_ARGS=("$@")
			break
			;;
		*) die "unknown argument $1 (see --help)" ;;
		esac
		shift
	done
	[[ "$QUICK" == 1 && "$WRITE" == 1 ]] && die "--write with --quick would replace the recorded numbers with quick ones; drop one"
	if ((web)); then
		for s in ${SERVERS//,/ }; do
			[[ "$s" == apache || "$s" == nginx ]] || die "--servers: unknown server $s (apache, nginx)"
		done
	fi
	QUICK_ARGS=()
	if [[ "$QUICK" == 1 ]]; then QUICK_ARGS=(--quick); fi
}

# bench_rerun_as_root SCRIPT WHO returns when the script runs as root; otherwise it runs SCRIPT (the path from the
# repository root) again with ARGS through sudo -n, keeping the environment and PATH, and dies when sudo -n cannot.
# The web benchmarks run their PHP workers as www-data, as in production: that takes root.
bench_rerun_as_root() {
	local script=$1 who=$2
	is_root && return 0
	if ! command -v sudo >/dev/null || ! sudo -n true 2>/dev/null; then
		die "$script must run as root (its PHP workers run as www-data), and sudo -n is not available"
	fi
	log "$who: not root; running again through sudo"
	exec sudo -n -E env "PATH=$PATH" bash "$ROOT/$script" "${ARGS[@]}"
}

# bench_trap STOP sets the traps every benchmark uses: on exit, whatever happens, STOP (a function stopping what the
# script started, safe to call twice) runs and the script exits with its own status; INT and TERM exit 130 and 143.
bench_trap() {
	_BENCH_STOP=$1
	trap _bench_cleanup EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
}
_bench_cleanup() {
	local rc=$?
	set +e
	trap - INT TERM
	"$_BENCH_STOP"
	exit "$rc"
}

# bench_run_bg CMD... runs CMD in the background, its PID in BENCH_PHP_PID (for the STOP of bench_trap), and waits
# for it, so that a signal runs the EXIT trap at once rather than after CMD; it returns CMD's status. Redirections
# given to bench_run_bg apply to CMD.
bench_run_bg() {
	local rc=0
	"$@" &
	BENCH_PHP_PID=$!
	wait "$BENCH_PHP_PID" || rc=$?
	BENCH_PHP_PID=
	return "$rc"
}

# stop_leftover DIR PIDFILE EXE stops the process a killed earlier run left behind: only if DIR/PIDFILE names a live
# process running EXE (basename) whose command line mentions DIR (its config), so a recycled pid is never hit.
stop_leftover() {
	local dir=$1 pidfile=$1/$2 exe=$3 pid
	[[ -r "$pidfile" ]] || return 0
	pid=$(head -n 1 "$pidfile" 2>/dev/null) || return 0
	if pid_alive "$pid" && [[ "$(basename "$(readlink -f "/proc/$pid/exe" 2>/dev/null)")" == "$exe" ]] &&
		tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF "$dir"; then
		log "stopping $exe left over from an earlier run (pid $pid)"
		stop_pid "$pid" "$exe" 20
	fi
}

# remove_workdir DIR TMP removes DIR and, when DIR is a symlink to a directory matching TMP.* in /tmp (see
# make_workdir), that directory too.
remove_workdir() {
	local dir=$1 tmp=$2 real
	real=$(readlink -f "$dir")
	rm -rf -- "$dir"
	if [[ "$real" == /tmp/"$tmp".* ]]; then rm -rf -- "$real"; fi
}

# make_workdir DIR TMP WHO USER... creates DIR, which each USER (the web servers' www-data, say) must be able to
# enter. When one cannot (a checkout under /root, say), DIR is a symlink to a new /tmp/TMP.XXXXXX instead; WHO
# prefixes the log line that says so.
make_workdir() {
	local dir=$1 tmp=$2 who=$3 u ok=1 new
	shift 3
	mkdir -p "$dir"
	for u in "$@"; do
		runuser -u "$u" -- test -x "$dir" || { ok=0; break; }
	done
	((ok)) && return 0
	rmdir "$dir"
	new=$(mktemp -d "/tmp/$tmp.XXXXXX")
	chmod 755 "$new"
	ln -s "$new" "$dir"
	local users="$*"
	log "$who: ${users// / or } cannot reach $dir; using $new (symlinked from $dir)"
}

# render TEMPLATE OUT NAME=VALUE... writes TEMPLATE with each @NAME@ replaced by VALUE; fails if any @...@ is left.
render() {
	local tpl=$1 out=$2 kv args=()
	shift 2
	for kv in "$@"; do
		args+=(-e "s|@${kv%%=*}@|${kv#*=}|g")
	done
	sed "${args[@]}" "$tpl" >"$out"
	! grep -n '@[A-Z_]*@' "$out" >&2 || die "render $tpl: placeholders left in $out"
}

# await WHAT PID LOG SECONDS CMD... runs CMD until it succeeds; fails when PID dies or after SECONDS, showing LOG.
await() {
	local what=$1 pid=$2 logf=$3 timeout=$4 deadline=$((SECONDS + $4))
	shift 4
	until "$@" >/dev/null 2>&1; do
		pid_alive "$pid" || { tail_file "$logf"; die "$what exited during startup"; }
		((SECONDS < deadline)) || { tail_file "$logf"; die "$what: not ready after ${timeout}s"; }
		sleep 0.1
	done
}

# has_children PID N succeeds when PID has at least N child processes (a web server's workers).
has_children() {
	(($(pgrep -c -P "$1") >= $2))
}

# bench_cmd SCRIPT prints the command line the report quotes: "bash SCRIPT ARGS", preceded by BENCH_QUICK= and
# BENCH_WRITE= when they are set.
bench_cmd() {
	local cmd="bash $1" v
	((${#ARGS[@]})) && cmd+=" ${ARGS[*]}"
	for v in BENCH_QUICK BENCH_WRITE; do
		if [[ -n "${!v:-}" ]]; then cmd="$v=${!v} $cmd"; fi
	done
	printf '%s' "$cmd"
}

# mariadb_version and postgres_version print the version of the server binaries the benchmarks start.
mariadb_version() { "$(_db_bin mariadbd mysqld)" --version | sed -E 's/.*Ver ([^ ]+).*/\1/'; }
postgres_version() { "$TETHER_PG_BINDIR/postgres" --version | awk '{ print $3 }'; }

# bench_facts sets what the CLI benchmarks' reports say about the machine: php_version, maria_version, go_version,
# cpu_model, mem, bench_date and load_before, warning when the load average says something else is running.
bench_facts() {
	# shellcheck disable=SC2034 # read by the scripts that call it
	{
		php_version=$(php -r 'echo PHP_VERSION;')
		maria_version=$(mariadb_version)
		go_version=$(go version | awk '{ print $3 }')
		cpu_model=$(awk -F': *' '/^model name/ { print $2; exit }' /proc/cpuinfo)
		mem=$(awk '/^MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)
		bench_date=$(date -u)
	}
	# Other work on the machine skews everything; record how busy it was, and say so when it was.
	load_before=$(cut -d' ' -f1 /proc/loadavg)
	if awk -v l="$load_before" 'BEGIN { exit !(l > 0.5) }'; then
		warn "load average is $load_before before the benchmark: something else is running; the numbers will be skewed"
	fi
}

# bench_load_lines BEFORE AFTER prints the report's lines on the load average around the run.
bench_load_lines() {
	echo "Load average (1 min) before the run: $1, after: $2 (the benchmark itself raises it; a high value"
	echo "before means other work shared the CPUs)."
}

# warn_logged LOG shows the end of tetherd's LOG when tetherd logged anything (its level is warn).
warn_logged() {
	if [[ -s "$1" ]]; then
		warn "tetherd logged warnings or errors during the run:"
		tail_file "$1" 20
	fi
}
