#!/usr/bin/env bash
# scripts/package-deb.sh: builds the Debian package of Tether (tetherd, the tether CLI, the systemd unit, a config
# and the docs) into var/pkg/tether_VERSION_ARCH.deb with dpkg-deb, then checks it: its metadata and files, and that
# the packaged tetherd accepts the packaged config (-check) and answers `tether check`.
#
#   bash scripts/package-deb.sh [--install] [VERSION]     # VERSION defaults to 0.0.0~git<date>.<commit>
#
# With --install (root only; make test does it on its throwaway machine) it also installs the package with dpkg,
# checks what the maintainer scripts did (the tether user, the runtime and state directories from the tmpfiles
# entry), starts the installed tetherd as the tether user on the installed config as systemd would, talks to it
# with the installed tether CLI, stops it, and purges the package.
#
# Installing: sudo apt install ./var/pkg/tether_*.deb; then edit /etc/tether/tetherd.toml and
# sudo systemctl restart tetherd.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
# shellcheck source=lib/common.sh
source scripts/lib/common.sh

command -v dpkg-deb >/dev/null || die "package-deb: dpkg-deb not found (Debian's dpkg)"
arch=$(dpkg --print-architecture)
INSTALL=0
if [[ "${1:-}" == --install ]]; then
	INSTALL=1
	shift
fi
version=${1:-0.0.0~git$(git log -1 --format=%cd --date=format:%Y%m%d 2>/dev/null || date +%Y%m%d).$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)}
out=$ROOT/var/pkg
tree=$out/tree
rm -rf "$tree"
mkdir -p "$tree/DEBIAN" "$tree/usr/bin" "$tree/lib/systemd/system" "$tree/etc/tether" "$tree/usr/share/doc/tether" \
	"$tree/usr/lib/tmpfiles.d"

log "package-deb: building tetherd and tether $version for $arch"
ldflags="-X github.com/tether-php/tether/server.buildVersion=$version"
CGO_ENABLED=1 go build -trimpath -ldflags "$ldflags" -o "$tree/usr/bin/tetherd" ./cmd/tetherd
CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$tree/usr/bin/tether" ./cmd/tether
install -m 0644 packaging/tetherd.service "$tree/lib/systemd/system/tetherd.service"
# The socket's and the SQLite database's directories, also where tetherd runs without systemd's RuntimeDirectory.
printf 'd /run/tether 0755 tether tether -\nd /var/lib/tether 0750 tether tether -\n' >"$tree/usr/lib/tmpfiles.d/tether.conf"
install -m 0640 packaging/tetherd.toml "$tree/etc/tether/tetherd.toml"
install -m 0644 etc/tetherd.toml "$tree/usr/share/doc/tether/tetherd.toml.example"
install -m 0644 README.md docs/operations.md docs/protocol.md docs/reliability.md "$tree/usr/share/doc/tether/"

cat >"$tree/DEBIAN/control" <<CONTROL
Package: tether
Version: $version
Architecture: $arch
Maintainer: Tether developers <tether@localhost>
Section: database
Priority: optional
Depends: adduser
Installed-Size: $(du -sk "$tree" | cut -f1)
Description: pooled data access for PHP: the tetherd sidecar
 tetherd holds warm, pooled connections to MySQL/MariaDB, PostgreSQL, SQLite,
 Cassandra, Bigtable and HTTP upstreams beside the web server; PHP talks to it
 over a Unix socket. The package installs tetherd, the tether CLI, a systemd
 unit and a configuration on SQLite.
CONTROL
echo /etc/tether/tetherd.toml >"$tree/DEBIAN/conffiles"
cat >"$tree/DEBIAN/postinst" <<'POSTINST'
#!/bin/sh
set -e
if [ "$1" = configure ]; then
	if ! getent passwd tether >/dev/null; then
		adduser --system --group --home /var/lib/tether --no-create-home --quiet tether
	fi
	if getent group www-data >/dev/null; then
		adduser --quiet tether www-data || true
	fi
	chown root:tether /etc/tether/tetherd.toml
	if command -v systemd-tmpfiles >/dev/null; then
		systemd-tmpfiles --create /usr/lib/tmpfiles.d/tether.conf || true
	else
		install -d -o tether -g tether -m 0755 /run/tether
		install -d -o tether -g tether -m 0750 /var/lib/tether
	fi
	if [ -d /run/systemd/system ]; then
		systemctl daemon-reload >/dev/null || true
		systemctl enable tetherd.service >/dev/null || true
		# An upgrade of a running tetherd hands its sockets to the new binary without dropping a PHP request
		# (docs/operations.md, "Upgrading tetherd"); a restart is the fallback, and the first start.
		if systemctl is-active --quiet tetherd.service && \
			/usr/bin/tether -config /etc/tether/tetherd.toml -timeout 90s upgrade >/dev/null 2>&1; then
			:
		else
			systemctl restart tetherd.service || true
		fi
	fi
fi
POSTINST
cat >"$tree/DEBIAN/prerm" <<'PRERM'
#!/bin/sh
set -e
if [ -d /run/systemd/system ] && [ "$1" = remove ]; then
	systemctl stop tetherd.service >/dev/null || true
	systemctl disable tetherd.service >/dev/null || true
fi
PRERM
cat >"$tree/DEBIAN/postrm" <<'POSTRM'
#!/bin/sh
set -e
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null || true
fi
POSTRM
chmod 0755 "$tree/DEBIAN/postinst" "$tree/DEBIAN/prerm" "$tree/DEBIAN/postrm"

deb=$out/tether_${version}_${arch}.deb
rm -f "$out"/tether_*.deb
dpkg-deb --root-owner-group --build "$tree" "$deb" >/dev/null
log "package-deb: built $deb ($(du -h "$deb" | cut -f1))"

# The checks: metadata, files, and the packaged binaries with the packaged config.
info=$(dpkg-deb --info "$deb")
[[ "$info" == *"Package: tether"* && "$info" == *"Version: $version"* ]] || die "package-deb: wrong metadata:\n$info"
contents=$(dpkg-deb --contents "$deb")
for f in ./usr/bin/tetherd ./usr/bin/tether ./lib/systemd/system/tetherd.service ./etc/tether/tetherd.toml \
	./usr/lib/tmpfiles.d/tether.conf ./usr/share/doc/tether/operations.md; do
	grep -q " $f\$" <<<"$contents" || die "package-deb: $f is not in the package"
done
check=$out/check
rm -rf "$check"
dpkg-deb -x "$deb" "$check"
"$check/usr/bin/tetherd" -config "$check/etc/tether/tetherd.toml" -check >/dev/null ||
	die "package-deb: the packaged tetherd refuses the packaged config"
"$check/usr/bin/tether" check "$check/etc/tether/tetherd.toml" >/dev/null ||
	die "package-deb: tether check refuses the packaged config"
if command -v systemd-analyze >/dev/null; then
	systemd-analyze verify "$check/lib/systemd/system/tetherd.service" 2>&1 | grep -v "Command /usr/bin/tetherd is not executable\|No such file" || true
fi
rm -rf "$check" "$tree"
log "package-deb: $deb checked (metadata, files, tetherd -check and tether check on the packaged config)"
((INSTALL)) || exit 0

# --- install, start, talk, stop, purge -------------------------------------------------------------------------
is_root || die "package-deb --install: run as root"
if dpkg -s tether >/dev/null 2>&1; then
	die "package-deb --install: a tether package is installed already; not touching it"
fi
PIDFILE=
cleanup_install() {
	set +e
	[[ -n "$PIDFILE" && -s "$PIDFILE" ]] && kill -TERM "$(cat "$PIDFILE")" 2>/dev/null
	dpkg --purge tether >/dev/null 2>&1
}
trap cleanup_install EXIT
dpkg -i "$deb" >"$out/install.log" 2>&1 || { tail_file "$out/install.log"; die "package-deb: dpkg -i failed"; }
getent passwd tether >/dev/null || die "package-deb: postinst made no tether user"
id -nG tether | grep -qw www-data || die "package-deb: the tether user is not in group www-data (the socket's group)"
for d in /run/tether /var/lib/tether; do
	[[ "$(stat -c %U "$d" 2>/dev/null)" == tether ]] || die "package-deb: $d is missing or not the tether user's"
done
[[ "$(stat -c %G /etc/tether/tetherd.toml)" == tether ]] || die "package-deb: /etc/tether/tetherd.toml is not readable by group tether"
# As systemd runs it (User=tether, ExecStartPre -check, ExecStart), without systemd.
runuser -u tether -- /usr/bin/tetherd -config /etc/tether/tetherd.toml -check >/dev/null ||
	die "package-deb: the installed tetherd refuses the installed config"
PIDFILE=$out/tetherd.pid
runuser -u tether -- /usr/bin/tetherd -config /etc/tether/tetherd.toml >"$out/tetherd.log" 2>&1 &
echo $! >"$PIDFILE"
for _ in $(seq 100); do [[ -S /run/tether/tether.sock ]] && break; sleep 0.1; done
[[ -S /run/tether/tether.sock ]] || { tail_file "$out/tetherd.log"; die "package-deb: the installed tetherd made no socket"; }
[[ "$(stat -c '%G %a' /run/tether/tether.sock)" == "www-data 660" ]] ||
	die "package-deb: the socket is $(stat -c '%G %a' /run/tether/tether.sock), want www-data 660"
/usr/bin/tether -config /etc/tether/tetherd.toml ping >/dev/null || die "package-deb: tether ping failed"
/usr/bin/tether -config /etc/tether/tetherd.toml query "SELECT 40 + 2 AS answer" | grep -q 42 ||
	die "package-deb: tether query through the installed tetherd failed"
phpdir=$(mktemp -d)
cp -r clients/php/autoload.php clients/php/src "$phpdir/"
chmod -R a+rX "$phpdir"
runuser -u www-data -- php -r 'require $argv[1]; $c = new Tether\Client(["socket" => "/run/tether/tether.sock"]); exit($c->queryOne("SELECT 1 AS one")["one"] === 1 ? 0 : 1);' \
	"$phpdir/autoload.php" || die "package-deb: PHP as www-data could not use the installed tetherd"
rm -rf "$phpdir"
kill -TERM "$(cat "$PIDFILE")"
wait_pid_exit "$(cat "$PIDFILE")" 20 || die "package-deb: the installed tetherd did not stop on SIGTERM"
PIDFILE=
dpkg --purge tether >"$out/purge.log" 2>&1 || { tail_file "$out/purge.log"; die "package-deb: dpkg --purge failed"; }
[[ ! -e /usr/bin/tetherd && ! -e /etc/tether/tetherd.toml ]] || die "package-deb: files left after purge"
trap - EXIT
log "package-deb: installed, started as user tether (socket www-data 0660, served tether and PHP as www-data), stopped, purged"
