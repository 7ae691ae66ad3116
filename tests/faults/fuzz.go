package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Coverage-guided fuzzing with the Go toolchain, for a bounded time: the
// frame decoder (wire's FuzzDecodeRequest) and the whole request handling of
// a server whose backends are fakes (package server's FuzzServeFrame: a
// reply or a clean close for every frame, no lock-up, a ping answered
// afterwards). Go keeps the inputs that reached new code in its cache's fuzz
// corpus, so that each run starts where the last one stopped; a failing input
// is written under the package's testdata/fuzz, where every later go test
// runs it as a seed.
func init() {
	register(campaign{name: "fuzz", title: "Coverage-guided fuzzing of the frame decoder and the request handler", run: runFuzz})
}

// fuzzTarget is one fuzz test and its package, relative to the repository
// root, and the executions it gets per second of the campaign's budget.
//
// The budget is a count (-fuzztime Nx), not a duration: with a duration, Go's
// fuzz coordinator (go1.26 and older) can fail a run that found nothing with
// "context deadline exceeded" when the deadline races a worker's last
// execution (golang/go#75804, fixed in go1.27). A count has no deadline to
// race. The rates are what a 2-core CI machine does, so that a budget of s
// seconds takes about s seconds there.
type fuzzTarget struct {
	name, pkg      string
	execsPerSecond int64
}

var fuzzTargets = []fuzzTarget{{"FuzzDecodeRequest", "./wire", 40000}, {"FuzzServeFrame", "./server", 1200}}

// fuzzBuildTime bounds the build of a fuzz test binary (instrumented: the
// first build after a change compiles every dependency again).
const fuzzBuildTime = 10 * time.Minute

// fuzzRun is what one `go test -fuzz` run reported.
type fuzzRun struct {
	target      fuzzTarget
	exitCode    int
	took        time.Duration // wall time, the build included
	elapsed     time.Duration // fuzzing time, as the fuzzer reported it
	execs       int64
	workers     int
	baseline    int    // seeds and cached corpus, run first
	interesting int    // inputs that reached new code in this run
	corpus      int    // the corpus after it
	crasher     string // a failing input's path from the repository root; "" for none
	failure     string // the failure's report
	buildFailed bool
	logPath     string
}

func runFuzz(e *env, r *report) error {
	seconds := int64(e.scale(150, 10))
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		return fmt.Errorf("run the suite from the repository root (run.sh does): %w", err)
	}
	cache, err := fuzzCache(e)
	if err != nil {
		return err
	}
	r.say("`go test -run '^$' -fuzz <target> -fuzztime <N>x` for each target (N: what the target runs in %ds on a 2-core "+
		"machine), from the repository root, with GOCACHE `%s` "+
		"(the fuzz corpus is kept in its `fuzz/` directory: each run goes on from the inputs earlier runs found). "+
		"FuzzServeFrame drives a real Server over its Unix socket and TCP listener, with fake backends that answer small "+
		"results, errors, timeouts and slowness as a request's text asks; its property: exactly one reply to every frame "+
		"with the id docs/protocol.md says (or a reply and a close where it says so), no `internal` error, a ping answered "+
		"afterwards, and once the client has gone no session, request, transaction or backend transaction left behind.",
		seconds, cache)
	var rows [][]string
	for _, t := range fuzzTargets {
		execs := t.execsPerSecond * seconds
		e.logf("fuzz: %s in %s for %d executions", t.name, t.pkg, execs)
		run, err := fuzzOnce(e, root, cache, t, execs)
		if err == nil && run.buildFailed {
			// Seen once while other builds shared the cache: a dependency's
			// export data missing. Not the code's fault if a second build works.
			r.say("%s: the build failed, and was tried again (the first output: `%s`):\n\n```\n%s\n```", t.name, run.logPath, run.failure)
			os.Rename(run.logPath, run.logPath+".build-failed")
			run, err = fuzzOnce(e, root, cache, t, execs)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", t.name, err)
		}
		crasher := "none"
		if run.crasher != "" {
			crasher = "`" + run.crasher + "`"
		}
		rate := "-"
		if run.elapsed > 0 {
			rate = fmt.Sprintf("%.0f", float64(run.execs)/run.elapsed.Seconds())
		}
		rows = append(rows, []string{t.name, "`" + t.pkg + "`", run.elapsed.String(), fmt.Sprint(run.execs), rate,
			fmt.Sprint(run.workers), fmt.Sprint(run.baseline), fmt.Sprint(run.interesting), fmt.Sprint(run.corpus),
			crasher, fmt.Sprintf("%.0f", run.took.Seconds())})
		if run.failure != "" {
			r.say("%s failed (go test exited %d; its output: `%s`):\n\n```\n%s\n```", t.name, run.exitCode, run.logPath, run.failure)
		}
		r.check(run.execs > 0, "%s: the fuzzer ran (%d executions)", t.name, run.execs)
		found := ""
		if run.crasher != "" {
			found = ", failing input " + run.crasher
		}
		r.check(run.exitCode == 0 && run.crasher == "", "%s: no failing input in %s of fuzzing (go test exited %d%s)",
			t.name, run.elapsed, run.exitCode, found)
	}
	r.table([]string{"target", "package", "fuzzed for", "execs", "execs/s", "workers", "seeds + cached corpus",
		"new interesting", "corpus after", "failing input", "took s (build included)"}, rows)
	return nil
}

// fuzzCache returns the GOCACHE the runs use: the toolchain's own, where
// run.sh's builds already put the dependencies, unless it is off or cannot
// be written; then one of the suite's working directory.
func fuzzCache(e *env) (string, error) {
	out, err := exec.Command("go", "env", "GOCACHE").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOCACHE: %w", err)
	}
	cache := strings.TrimSpace(string(out))
	if cache != "" && cache != "off" && os.MkdirAll(filepath.Join(cache, "fuzz"), 0o755) == nil {
		if f, err := os.CreateTemp(filepath.Join(cache, "fuzz"), "probe"); err == nil {
			f.Close()
			os.Remove(f.Name())
			return cache, nil
		}
	}
	cache = filepath.Join(e.dir, "gocache")
	return cache, os.MkdirAll(cache, 0o755)
}

var (
	fuzzStatsRe    = regexp.MustCompile(`fuzz: elapsed: (\S+), execs: (\d+) \(\d+/sec\), new interesting: (\d+) \(total: (\d+)\)`)
	fuzzBaselineRe = regexp.MustCompile(`gathering baseline coverage: \d+/(\d+) completed, now fuzzing with (\d+) workers`)
	fuzzCrasherRe  = regexp.MustCompile(`Failing input written to (\S+)`)
)

// fuzzOnce runs one target for a number of executions and reads what it
// reported.
func fuzzOnce(e *env, root, cache string, t fuzzTarget, execs int64) (*fuzzRun, error) {
	run := &fuzzRun{target: t, logPath: filepath.Join(e.dir, "fuzz-"+t.name+".log")}
	// A machine slower than the rates assume still gets four times the
	// budget's time before the run is interrupted.
	d := 4 * time.Duration(execs/t.execsPerSecond) * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), fuzzBuildTime+d+time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "test", "-run", "^$", "-fuzz", "^"+t.name+"$", "-fuzztime", fmt.Sprintf("%dx", execs), t.pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOCACHE="+cache)
	// go test starts the test binary, which starts the workers: on timeout,
	// their process group is interrupted (the fuzzer then stops and reports).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGINT) }
	cmd.WaitDelay = 30 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	run.took = time.Since(start)
	if werr := os.WriteFile(run.logPath, out.Bytes(), 0o644); werr != nil {
		return nil, werr
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		run.exitCode = ee.ExitCode()
	default:
		return nil, fmt.Errorf("go test: %w", err)
	}
	text := out.String()
	if ctx.Err() != nil {
		run.failure = fmt.Sprintf("go test did not finish within %s and was interrupted", fuzzBuildTime+d+time.Minute)
	}
	if m := fuzzBaselineRe.FindStringSubmatch(text); m != nil {
		run.baseline, _ = strconv.Atoi(m[1])
		run.workers, _ = strconv.Atoi(m[2])
	}
	if all := fuzzStatsRe.FindAllStringSubmatch(text, -1); len(all) > 0 {
		m := all[len(all)-1]
		run.elapsed, _ = time.ParseDuration(m[1])
		run.execs, _ = strconv.ParseInt(m[2], 10, 64)
		run.interesting, _ = strconv.Atoi(m[3])
		run.corpus, _ = strconv.Atoi(m[4])
	}
	if m := fuzzCrasherRe.FindStringSubmatch(text); m != nil {
		run.crasher = filepath.ToSlash(filepath.Join(t.pkg, m[1]))
	}
	run.buildFailed = strings.Contains(text, "[build failed]")
	if run.exitCode != 0 || run.crasher != "" {
		run.failure = strings.TrimSpace(run.failure + "\n" + fuzzFailure(text))
	}
	return run, nil
}

// fuzzFailure returns the part of go test's output that tells what failed:
// from the first "--- FAIL" (or the last 40 lines, if none).
func fuzzFailure(text string) string {
	if i := strings.Index(text, "--- FAIL"); i >= 0 {
		text = text[i:]
	}
	lines := strings.Split(strings.TrimSpace(text), "\n")
	if len(lines) > 40 {
		lines = lines[len(lines)-40:]
	}
	return strings.Join(lines, "\n")
}
