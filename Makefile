# Tether: make build | run | test | bench | faults | clean. `make test` is the whole suite; CI runs it through .ci/run.

GO ?= go

.PHONY: build run test bench bench-compare faults clean

# build compiles the daemon to bin/tetherd and the operators' tool to bin/tether.
build:
	$(GO) build -o bin/tetherd ./cmd/tetherd
	$(GO) build -o bin/tether ./cmd/tether

# run starts tetherd on its embedded default (SQLite at var/tether.db, socket var/tether.sock) from the repo root.
run: build
	mkdir -p var
	./bin/tetherd

# test installs missing packages, starts throwaway MariaDB and PostgreSQL in var/test, and runs go vet, go test
# -race, PHPUnit and the PHP quickstart against them (scripts/test.sh).
test:
	bash scripts/test.sh

# bench runs all four benchmarks in bench/ (bench/run.sh), one after the other, each on its own throwaway servers:
# the CLI round trips (bench/cli, ~2 min), the web pages under nginx and apache2 (bench/web, 20-30 min, as root), the
# two-host model (bench/web/twohost.sh: databases 0.1 and 0.5 ms away over TLS, ~12 min, as root), the replicas
# (bench/replicas/run.sh: a page of reads on one server and on primary + replica, ~6 min, as root), the WordPress and
# Laravel pages (bench/apps, ~12 min, as root) and fan-out and join (bench/fanout, ~2 min): about
# 45 minutes in all, markdown on stdout. BENCH_ARGS=--quick (~10 min) proves they run; BENCH_ARGS=--write also
# records the results in docs/benchmarks.md. See docs/benchmarks.md.
bench:
	bash bench/run.sh $(BENCH_ARGS)

# bench-compare runs two tetherd builds side by side (bench/compare/run.sh): the point read and the page of 20 reads,
# BEFORE (a git revision, default HEAD~1) against the working tree, rounds interleaved; for changes that must not move
# the numbers. BENCH_ARGS=--write records the result in docs/benchmarks.md.
BEFORE ?= HEAD~1
bench-compare:
	bash bench/compare/run.sh --before $(BEFORE) $(BENCH_ARGS)

# faults runs the full fault suite (tests/faults; `make test` runs it --quick) and prints its report; see
# docs/reliability.md. FAULTS_ARGS=--write also records the report there.
faults:
	bash tests/faults/run.sh $(FAULTS_ARGS)

# clean removes the binary and the test instances (stopping any a killed test run left behind).
clean:
	bash -c 'source scripts/lib/databases.sh && clean_db_dir var/test'
	rm -rf bin
