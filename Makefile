# Tether: make build | run | test | bench | faults | clean. `make test` is the whole suite; CI runs it through .ci/run.

GO ?= go

.PHONY: build run test bench faults clean

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

# bench runs the benchmark suite in bench/.
bench:
	@if [ -f bench/run.sh ]; then exec bash bench/run.sh; else \
		echo "make bench: the benchmark lives in bench/, and bench/run.sh does not exist yet" >&2; exit 1; fi

# faults runs the full fault suite (tests/faults; `make test` runs it --quick) and prints its report; see
# docs/reliability.md. FAULTS_ARGS=--write also records the report there.
faults:
	bash tests/faults/run.sh $(FAULTS_ARGS)

# clean removes the binary and the test instances (stopping any a killed test run left behind).
clean:
	bash -c 'source scripts/lib/databases.sh && clean_db_dir var/test'
	rm -rf bin
