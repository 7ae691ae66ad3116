# shellcheck shell=bash
# scripts/lib/common.sh: logging, timing and privilege helpers shared by the scripts in scripts/.
# Source it from bash; it only defines functions.

[[ -n "${_TETHER_COMMON_SH:-}" ]] && return 0
_TETHER_COMMON_SH=1

# log prints a progress line on stderr, prefixed so it stands out from tool output.
log() { printf '==> %s\n' "$*" >&2; }

# warn prints a warning on stderr.
warn() { printf '==> WARNING: %s\n' "$*" >&2; }

# die prints an error on stderr and exits 1 (the caller's EXIT trap still runs).
die() { printf '==> ERROR: %s\n' "$*" >&2; exit 1; }

# now prints the wall clock in seconds with microseconds (bash 5's EPOCHREALTIME).
now() { printf '%s' "${EPOCHREALTIME/,/.}"; }

# since T0 prints the seconds elapsed since T0 (a value of now), e.g. "3.2".
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# tail_file FILE [N] prints the last N (40) lines of FILE, framed, for failure reports.
tail_file() {
	local f=$1 n=${2:-40}
	if [[ -r "$f" ]]; then
		printf -- '---- last %s lines of %s ----\n' "$n" "$f" >&2
		tail -n "$n" "$f" >&2 || true
		printf -- '---- end of %s ----\n' "$f" >&2
	else
		printf -- '---- %s: no such file ----\n' "$f" >&2
	fi
}

# is_root succeeds when the script runs as uid 0.
is_root() { [[ "$(id -u)" == 0 ]]; }

# as_root CMD... runs CMD as root: directly when already root, else through sudo; fails when neither works.
as_root() {
	if is_root; then
		"$@"
	elif command -v sudo >/dev/null 2>&1; then
		sudo "$@"
	else
		die "need root for: $* (not root and sudo is not installed)"
	fi
}

# pid_alive PID succeeds when PID names a live process that is not a zombie.
pid_alive() {
	local pid=$1 state
	[[ "$pid" =~ ^[0-9]+$ ]] || return 1
	kill -0 "$pid" 2>/dev/null || return 1
	state=$(awk '{ print $3 }' "/proc/$pid/stat" 2>/dev/null) || return 1
	[[ "$state" != Z ]]
}

# wait_for_socket PID SOCKET LOG SECONDS waits until the process PID (tetherd) has created the Unix socket SOCKET,
# which tetherd does only once every backend has connected; it dies, showing the end of LOG, if PID exits first or
# SECONDS pass.
wait_for_socket() {
	local pid=$1 sock=$2 logf=$3 deadline=$((SECONDS + $4))
	until [[ -S "$sock" ]]; do
		pid_alive "$pid" || { tail_file "$logf"; die "pid $pid exited before creating $sock"; }
		((SECONDS < deadline)) || { tail_file "$logf"; die "pid $pid created no $sock within $4s"; }
		sleep 0.05
	done
}

# replace_doc_section DOC NAME SECTION_FILE replaces what lies between the lines <!-- NAME:start --> and
# <!-- NAME:end --> of DOC with SECTION_FILE's lines. Several benchmarks own sections of one file: DOC is read fresh
# and the result moved into place with one rename, so only NAME's section changes.
replace_doc_section() {
	local doc=$1 name=$2 section=$3
	[[ -f "$doc" ]] || die "$doc does not exist"
	if ! grep -q "^<!-- $name:start -->\$" "$doc" || ! grep -q "^<!-- $name:end -->\$" "$doc"; then
		die "$doc lacks the <!-- $name:start --> / <!-- $name:end --> markers"
	fi
	awk -v section="$section" -v start="<!-- $name:start -->" -v end="<!-- $name:end -->" '
		$0 == start { print; print ""; while ((getline line < section) > 0) print line; print ""; skip = 1; next }
		$0 == end { skip = 0 }
		!skip { print }
	' "$doc" >"$doc.$name.tmp"
	mv "$doc.$name.tmp" "$doc"
}

# wait_pid_exit PID SECONDS waits until PID has exited; fails if it is still alive after SECONDS.
wait_pid_exit() {
	local pid=$1 deadline=$((SECONDS + $2))
	while pid_alive "$pid"; do
		((SECONDS < deadline)) || return 1
		sleep 0.1
	done
}

# stop_pid PID NAME [GRACE] [SIGNAL] sends SIGNAL (TERM) to PID, waits up to GRACE (30) seconds, then sends
# SIGKILL. It does nothing when PID is empty or already gone.
stop_pid() {
	local pid=$1 name=$2 grace=${3:-30} sig=${4:-TERM}
	[[ -n "$pid" ]] && pid_alive "$pid" || return 0
	kill -"$sig" "$pid" 2>/dev/null || true
	if ! wait_pid_exit "$pid" "$grace"; then
		warn "$name (pid $pid) still running ${grace}s after SIG$sig; sending SIGKILL"
		kill -KILL "$pid" 2>/dev/null || true
		wait_pid_exit "$pid" 10 || warn "$name (pid $pid) survived SIGKILL"
	fi
}

# pid_cwd_is PID DIR succeeds when PID's working directory is DIR (both resolved). Used to make sure a pid file
# left by an earlier run still names the process that run started, not an unrelated one that reused the pid.
pid_cwd_is() {
	local cwd want
	cwd=$(readlink -f "/proc/$1/cwd" 2>/dev/null) || return 1
	want=$(readlink -f "$2" 2>/dev/null) || return 1
	[[ -n "$cwd" && "$cwd" == "$want" ]]
}

# free_port START prints the first TCP port from START upward (20 tries) that no socket of this host holds: none
# accepts on 127.0.0.1 and none, listening or connected, has it as its local port (/proc/net/tcp{,6}). The second
# check matters for ports in the kernel's ephemeral range (ip_local_port_range, 32768-60999 by default), where an
# outgoing connection may own the port and a server's bind fails with EADDRINUSE although nothing accepts there;
# the defaults of these scripts stay below that range too.
free_port() {
	local p
	for ((p = $1; p < $1 + 20; p++)); do
		if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			continue
		fi
		if port_has_socket "$p"; then
			continue
		fi
		printf '%s' "$p"
		return 0
	done
	die "no free port in $1..$(($1 + 19)) on 127.0.0.1"
}

# port_has_socket PORT succeeds when a TCP socket of this host (any state, IPv4 or IPv6) has PORT as its local port.
port_has_socket() {
	local hex
	hex=$(printf '%04X' "$1")
	awk -v want=":$hex" 'FNR > 1 && substr($2, length($2) - 4) == want { found = 1; exit } END { exit !found }' \
		/proc/net/tcp /proc/net/tcp6 2>/dev/null
}

# check_socket_path PATH fails when PATH is too long for a Unix socket (sun_path holds 107 bytes).
check_socket_path() {
	((${#1} <= 107)) || die "Unix socket path too long (${#1} > 107 bytes): $1; set TETHER_TEST_DIR to a shorter directory"
}

# apt_install_missing [--no-recommends] WHO PKG... installs with apt the packages of PKG that are not installed
# (one dpkg-query each: a quick no-op when all are), as root or through sudo, after one apt-get update. The
# packages' init scripts may not start services meanwhile (a policy-rc.d forbids it while there is none): scripts
# here start their own throwaway servers and never the system's. WHO prefixes the log lines.
apt_install_missing() {
	local recommends=() who pkg policy=/usr/sbin/policy-rc.d policy_added='' t0
	if [[ "${1:-}" == --no-recommends ]]; then
		recommends=(--no-install-recommends)
		shift
	fi
	who=$1
	shift
	local missing=()
	for pkg in "$@"; do
		[[ "$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)" == installed ]] || missing+=("$pkg")
	done
	if ((${#missing[@]} == 0)); then
		log "$who: all $# packages installed"
		return 0
	fi
	log "$who: missing ${missing[*]}; installing with apt"
	command -v apt-get >/dev/null || die "apt-get not found: install ${missing[*]} by hand"
	if [[ ! -e "$policy" ]]; then
		as_root sh -c "printf '#!/bin/sh\nexit 101\n' > $policy && chmod 755 $policy"
		policy_added=1
	fi
	t0=$(now)
	local rc=0
	as_root apt-get update -q && as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${recommends[@]}" "${missing[@]}" || rc=$?
	[[ -n "$policy_added" ]] && as_root rm -f "$policy"
	((rc == 0)) || die "$who: apt-get install ${missing[*]} failed (exit $rc)"
	log "$who: installed in $(since "$t0")s"
}
