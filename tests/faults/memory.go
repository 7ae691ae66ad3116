package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tether-php/tether/wire"
)

// Memory attacks by local clients: what a hostile or buggy client on the host
// can make tetherd hold, and whether the limits of docs/operations.md
// ("Limits") bound it. Each attack runs against a fresh tetherd with explicit
// limits, while tetherd's RSS is sampled every 50 ms and a well-behaved
// bystander reads from maria throughout:
//
//  1. half-sent frames: connections that announce a legal max_frame_bytes
//     frame, send half of it, and stop;
//  2. non-readers: clients that pipeline queries with 1 MiB results and never
//     read a reply (each dials again when tetherd closes it);
//  3. a flood: one connection pipelining slow statements without reading;
//  4. slowloris: connections that send a few bytes of a frame, then trickle
//     the rest a byte at a time or stop.
//
// Invariants, for each: tetherd survives; its RSS peak (sampled, and VmHWM)
// grows by at most memoryPeakFactor × max_memory_bytes over RSS before, and a
// few seconds after the attackers left RSS is within memoryAfterSlack of
// RSS before; the bystander sees no error. And for the attacks: partial
// frames are closed within client_frame_timeout plus memoryFrameSlack, each
// with a typed error naming the limit, and max_memory_bytes closes only the
// excess; the non-readers are disconnected or paused, never buffered without
// bound, and told why when closed; a departed flood's statements stop.
func init() {
	register(campaign{name: "memory", title: "Memory attacks by local clients", run: runMemory})
}

// The limits every attack's tetherd runs with (max_memory_bytes is set per
// attack), and the bounds judged.
const (
	memoryMaxConns     = 8       // max_conns of each pool
	memoryClientConns  = 2048    // max_client_conns (the default)
	memoryMaxFrame     = 8 << 20 // max_frame_bytes (the default, set explicitly)
	memoryMaxResult    = 4 << 20 // max_result_bytes
	memoryMaxOutput    = 8 << 20 // max_client_output_bytes
	memoryMaxRequests  = 64      // max_client_requests (the default)
	memoryFrameTimeout = 3 * time.Second
	// memoryFrameSlack is what a partial frame may outlive
	// client_frame_timeout by, counted from the attacker's first byte: the
	// 250 ms sweep, tetherd accepting a thousand connections at once (the
	// timeout runs from when it reads the first bytes), and a 2-vCPU host
	// shared with the databases and the attackers themselves.
	memoryFrameSlack = 3 * time.Second
	// memoryPeakFactor bounds the sampled RSS peak: it may grow over RSS
	// before (the binary's pages, the pools: not what the budget governs) by
	// max_memory_bytes, the Go runtime's soft limit checked every 250 ms,
	// plus a quarter for the runtime's own overhead and one sweep's intake.
	memoryPeakFactor = 1.25
	// memoryAfterSlack bounds RSS a few seconds after the attackers left:
	// what they made tetherd hold is given back, within this of RSS before.
	memoryAfterSlack = 64 << 20
	// memorySettleMax is how long RSS has to come back within
	// memoryAfterSlack once the attackers left.
	memorySettleMax   = 8 * time.Second
	memorySampleEvery = 50 * time.Millisecond
	memoryBigResult   = 1 << 20 // bytes per result of the non-readers' query
	// memoryPausedAfter: a non-reader's socket that has taken nothing for
	// this long at the end of the attack is paused.
	memoryPausedAfter = time.Second
)

// runMemory mounts the four attacks, each against its own tetherd, and
// reports them in one table.
func runMemory(e *env, r *report) error {
	halfSent := e.scale(100, 32)
	nonReaders := 20
	flood := e.scale(100000, 10000)
	slowloris := e.scale(1000, 200)
	halfBudget := int64(e.scale(256, 64)) << 20
	r.say("Four attacks a hostile or buggy local client can mount, each against a fresh tetherd (pools of %d on maria "+
		"and pg), while tetherd's RSS (VmRSS) is sampled every %s and a bystander, on a connection of its own, reads `SELECT ?` "+
		"from maria every 10 ms. Limits set in [server]: max_frame_bytes %d (8 MiB), max_result_bytes %d (4 MiB), "+
		"max_client_output_bytes %d (8 MiB), max_client_requests %d, max_client_conns %d, client_frame_timeout %s, "+
		"client_idle_timeout off, default_timeout 30s; max_memory_bytes per attack, in the table.",
		memoryMaxConns, memorySampleEvery, memoryMaxFrame, memoryMaxResult, memoryMaxOutput, memoryMaxRequests, memoryClientConns,
		memoryFrameTimeout)
	r.say("1. **half-sent frames**: %d connections each send the 4-byte header of a legal %d-byte frame (a `query` whose "+
		"parameter pads it to exactly max_frame_bytes) and half its payload, then nothing: %s MiB held in partial frames, over "+
		"a max_memory_bytes of %s MiB.\n"+
		"2. **non-readers**: %d clients pipeline `SELECT REPEAT(?, %d)` on maria (1 MiB results), 4 frames per write, and "+
		"never read a reply; a client whose connection tetherd closes dials again (until 2 s before the end, so that every "+
		"connection open at the end has had time to be paused), for %s.\n"+
		"3. **flood**: one connection pipelines %d `SELECT SLEEP(1)` on maria, 500 frames per write, without reading, "+
		"for %s; then it reads what is left in its socket and leaves.\n"+
		"4. **slowloris**: %d connections at once; half send 2 bytes of a `ping` frame's header and stop, half send the "+
		"header and then one byte of the payload every 500 ms.",
		halfSent, memoryMaxFrame, mib(int64(halfSent)*memoryMaxFrame/2), mib(halfBudget),
		nonReaders, memoryBigResult, memoryNonReaderTime(e),
		flood, memoryFloodTime(e), slowloris)
	attacks := []struct {
		name   string
		budget int64 // max_memory_bytes
		mount  func(t *memoryTrial) error
	}{
		{"half-sent frames", halfBudget, func(t *memoryTrial) error { return mountHalfSent(t, halfSent) }},
		{"non-readers", 256 << 20, func(t *memoryTrial) error { return mountNonReaders(t, nonReaders, memoryNonReaderTime(e)) }},
		{"flood", 256 << 20, func(t *memoryTrial) error { return mountFlood(t, flood, memoryFloodTime(e)) }},
		{"slowloris", 256 << 20, func(t *memoryTrial) error { return mountSlowloris(t, slowloris) }},
	}
	var rows [][]string
	var logs []string
	for _, a := range attacks {
		t, err := runMemoryTrial(e, r, a.name, a.budget, a.mount)
		if err != nil {
			return fmt.Errorf("%s: %w", a.name, err)
		}
		rows = append(rows, t.row)
		logs = append(logs, t.logSummary())
	}
	r.table([]string{"attack", "max_memory_bytes MiB", "RSS before MiB", "RSS peak MiB: sampled / VmHWM (bound)",
		"RSS after MiB (bound)", "how the attackers were stopped", "bystander reads during", "bystander p50 / p99 / max ms",
		"bystander errors"}, rows)
	r.say("The limits tetherd's log named during each attack (lines with `server.<key>`, counted; the first of each quoted):")
	r.say("%s", strings.Join(logs, "\n"))
	return nil
}

func memoryNonReaderTime(e *env) time.Duration { return time.Duration(e.scale(15, 5)) * time.Second }
func memoryFloodTime(e *env) time.Duration     { return time.Duration(e.scale(20, 5)) * time.Second }

// memoryServerLines returns the [server] lines of the common limits and of
// a max_memory_bytes of budget.
func memoryServerLines(budget int64) string {
	return fmt.Sprintf("max_frame_bytes = %d\nmax_result_bytes = %d\nmax_client_output_bytes = %d\n"+
		"max_client_requests = %d\nmax_client_conns = %d\nclient_frame_timeout = %q\nclient_idle_timeout = \"0s\"\n"+
		"max_memory_bytes = %d\n",
		memoryMaxFrame, memoryMaxResult, memoryMaxOutput, memoryMaxRequests, memoryClientConns, memoryFrameTimeout.String(), budget)
}

// memoryTrial is one attack against its own tetherd.
type memoryTrial struct {
	e       *env
	r       *report
	name    string
	budget  int64 // max_memory_bytes
	logFrom int64 // the size of tetherd's log when the trial began
	// stopped says how the attackers were stopped; the attack sets it.
	stopped   string
	row       []string
	logged    map[string]int       // lines naming each server.* key
	example   map[string]string    // the first of them
	firstTime map[string]time.Time // the time the first was logged
}

// check judges an invariant of this attack.
func (t *memoryTrial) check(ok bool, format string, args ...any) {
	t.r.check(ok, t.name+": "+format, args...)
}

// runMemoryTrial starts a tetherd with the common limits and a
// max_memory_bytes of budget, and the bystander; it measures RSS, mounts the
// attack (which returns when its attackers have left), waits a few seconds,
// measures again, and judges the invariants every attack shares.
func runMemoryTrial(e *env, r *report, name string, budget int64, mount func(t *memoryTrial) error) (*memoryTrial, error) {
	if err := e.startTetherd(memoryMaxConns, memoryServerLines(budget)); err != nil {
		return nil, fmt.Errorf("start tetherd: %w", err)
	}
	t := &memoryTrial{e: e, r: r, name: name, budget: budget}
	if fi, err := os.Stat(e.logPath); err == nil {
		t.logFrom = fi.Size()
	}
	by := startBystander(e)
	defer by.stop()
	time.Sleep(time.Duration(e.scale(1000, 500)) * time.Millisecond)
	before, _ := e.memory()
	sampler := startRSSSampler(e, before+budget)
	by.phase.Store(phaseDuring)
	e.logf("memory: %s", name)
	began := time.Now()
	if err := mount(t); err != nil {
		sampler.stop()
		return nil, err
	}
	by.phase.Store(phaseAfter)
	// RSS after: polled until back within the bound, for at most
	// memorySettleMax (tetherd returns free memory to the system at most
	// every 5 s); the time it took is reported.
	left := time.Now()
	var after, hwm int64
	for {
		after, hwm = e.memory()
		if after <= before+memoryAfterSlack || time.Since(left) >= memorySettleMax {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	settle := time.Since(left).Round(100 * time.Millisecond)
	peak := sampler.stop()
	by.stop()
	if err := t.readLog(); err != nil {
		return nil, err
	}

	if shed := t.firstTime["server.max_memory_bytes"]; !shed.IsZero() || !sampler.firstOver.IsZero() {
		since := func(at time.Time) string {
			if at.IsZero() {
				return "never"
			}
			return "+" + seconds(at.Sub(began)) + " s"
		}
		r.say("%s: sampled RSS first over RSS before + max_memory_bytes (%s MiB) at %s after the attack began; the first "+
			"connection closed for max_memory_bytes logged at %s.", name, mib(before+budget), since(sampler.firstOver), since(shed))
	}
	alive := e.alive()
	t.check(alive, "tetherd is still running")
	peakBound := before + int64(float64(budget)*memoryPeakFactor)
	// VmHWM is this tetherd's own peak (each attack starts a fresh one), and
	// catches what falls between two samples.
	t.check(alive && max(peak, hwm) <= peakBound, "RSS peak (sampled, and VmHWM) within RSS before + %.2f × max_memory_bytes "+
		"(%s MiB; sampled %s MiB, VmHWM %s MiB)", memoryPeakFactor, mib(peakBound), mib(peak), mib(hwm))
	afterBound := before + memoryAfterSlack
	t.check(alive && after <= afterBound, "RSS within %s MiB of before at most %s after the attackers left (%s MiB; before %s, after %s, %s after)",
		mib(memoryAfterSlack), memorySettleMax, mib(afterBound), mib(before), mib(after), settle)
	reads, errs, firstErr := by.during()
	p50, p99, mx := durations(by.lat[phaseDuring])
	if firstErr != nil {
		r.say("%s: the bystander's first error: %v", name, firstErr)
	}
	t.check(errs == 0 && reads > 0, "the bystander's reads all succeed during the attack (%d reads, %d errors)", reads, errs)
	t.row = []string{name, mib(budget), mib(before), fmt.Sprintf("%s / %s (%s)", mib(peak), mib(hwm), mib(peakBound)),
		fmt.Sprintf("%s (%s)", mib(after), mib(afterBound)), t.stopped, fmt.Sprint(reads),
		ms(p50) + " / " + ms(p99) + " / " + ms(mx), fmt.Sprint(errs)}
	return t, nil
}

// limitKey matches the name of a [server] limit in a log line.
var limitKey = regexp.MustCompile(`server\.[a-z_]+`)

// readLog counts, for each server.* key, the lines tetherd logged since the
// trial began that name it, and keeps the first (backend debug lines left
// out). It reads the log again each time: an attack may call it to judge what
// was logged, and the trial calls it at the end for the report.
// closedCount is the count of clients a log line says were closed.
var closedCount = regexp.MustCompile(`\bclosed=(\d+)\b`)

func (t *memoryTrial) readLog() error {
	t.logged, t.example, t.firstTime = map[string]int{}, map[string]string{}, map[string]time.Time{}
	f, err := os.Open(t.e.logPath)
	if err != nil {
		return fmt.Errorf("open tetherd's log: %w", err)
	}
	defer f.Close()
	if _, err := f.Seek(t.logFrom, io.SeekStart); err != nil {
		return fmt.Errorf("seek tetherd's log: %w", err)
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "DEBUG") {
			continue
		}
		seen := map[string]bool{}
		for _, k := range limitKey.FindAllString(line, -1) {
			if seen[k] {
				continue
			}
			seen[k] = true
			// A line may count several clients at once (closed=N: tetherd
			// logs the closes of a limit at most once a second).
			n := 1
			if m := closedCount.FindStringSubmatch(line); m != nil {
				n, _ = strconv.Atoi(m[1])
			}
			t.logged[k] += n
			if t.example[k] == "" {
				t.example[k] = line
				t.firstTime[k] = logTime(line)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read tetherd's log: %w", err)
	}
	return nil
}

// logTime returns the time of a line of tetherd's text log (time=...), the
// zero time if it has none.
func logTime(line string) time.Time {
	f, _, _ := strings.Cut(line, " ")
	v, ok := strings.CutPrefix(f, "time=")
	if !ok {
		return time.Time{}
	}
	at, _ := time.Parse(time.RFC3339Nano, v)
	return at
}

// logSummary is the markdown list item of the limits the log named.
func (t *memoryTrial) logSummary() string {
	if len(t.logged) == 0 {
		return fmt.Sprintf("- %s: none", t.name)
	}
	keys := make([]string, 0, len(t.logged))
	for k := range t.logged {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		ex := t.example[k]
		if len(ex) > 300 {
			ex = ex[:300] + "…"
		}
		parts = append(parts, fmt.Sprintf("`%s` × %d, e.g. `%s`", k, t.logged[k], strings.ReplaceAll(ex, "`", "'")))
	}
	return fmt.Sprintf("- %s: %s", t.name, strings.Join(parts, "; "))
}

// The bystander's phases: its figures are kept apart for each.
const (
	phaseBefore = iota
	phaseDuring
	phaseAfter
)

// bystander is a well-behaved client: on a connection of its own, it reads
// `SELECT ?` from maria every 10 ms, checks the value it gets back, and
// records each read's latency and any error by phase.
type bystander struct {
	e        *env
	phase    atomic.Int32
	mu       sync.Mutex
	lat      [3][]time.Duration
	errs     [3]int
	firstErr error
	stopc    chan struct{}
	done     chan struct{}
	once     sync.Once
}

func startBystander(e *env) *bystander {
	b := &bystander{e: e, stopc: make(chan struct{}), done: make(chan struct{})}
	go b.run()
	return b
}

func (b *bystander) run() {
	defer close(b.done)
	var c *client
	defer func() {
		if c != nil {
			c.close()
		}
	}()
	for i := int64(1); ; i++ {
		select {
		case <-b.stopc:
			return
		case <-time.After(10 * time.Millisecond):
		}
		ph := b.phase.Load()
		if c == nil {
			var err error
			if c, err = b.e.dial(); err != nil {
				b.record(ph, 0, fmt.Errorf("dial tetherd: %w", err))
				c = nil
				continue
			}
		}
		start := time.Now()
		rep, err := c.do(wire.Request{Op: wire.OpQuery, Backend: "maria", SQL: "SELECT ?", Params: []any{i}}, 15*time.Second)
		took := time.Since(start)
		if err == nil {
			rows, _ := rep.Fields["rows"].([]any)
			var got any
			if len(rows) == 1 {
				if row, _ := rows[0].([]any); len(row) == 1 {
					got = row[0]
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(i) {
				err = fmt.Errorf("SELECT %d returned %v", i, rep.Fields["rows"])
			}
		} else if rep == nil {
			c.close() // a broken connection: the next read dials again
			c = nil
		}
		b.record(ph, took, err)
	}
}

func (b *bystander) record(ph int32, took time.Duration, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err != nil {
		b.errs[ph]++
		if b.firstErr == nil {
			b.firstErr = err
		}
		return
	}
	b.lat[ph] = append(b.lat[ph], took)
}

// during returns the reads completed during the attack, the errors, and the
// first error of any phase.
func (b *bystander) during() (reads, errs int, first error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.lat[phaseDuring]), b.errs[phaseDuring], b.firstErr
}

// stop ends the reads and waits for the last; safe to call twice.
func (b *bystander) stop() {
	b.once.Do(func() { close(b.stopc) })
	<-b.done
}

// rssSampler records the largest VmRSS of tetherd, every memorySampleEvery,
// until stopped, and when it first passed a threshold.
type rssSampler struct {
	most      int64
	over      int64     // the threshold
	firstOver time.Time // zero: never passed
	stopc     chan struct{}
	done      chan struct{}
}

// startRSSSampler samples tetherd's RSS until stop, noting when it first
// passes over.
func startRSSSampler(e *env, over int64) *rssSampler {
	s := &rssSampler{over: over, stopc: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(memorySampleEvery)
		defer t.Stop()
		for {
			rss, _ := e.memory()
			s.most = max(s.most, rss)
			if rss > s.over && s.firstOver.IsZero() {
				s.firstOver = time.Now()
			}
			select {
			case <-s.stopc:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// stop ends the sampling and returns the largest RSS seen; firstOver may be
// read once it has returned.
func (s *rssSampler) stop() int64 {
	close(s.stopc)
	<-s.done
	return s.most
}

// peerClosed reports an error that means the other end closed the
// connection.
func peerClosed(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// partialEnd is how a connection holding a partial frame ended.
type partialEnd struct {
	err     error         // dialing failed, or something other than the close
	code    string        // the error tetherd answered (id 0) before closing; "" for none
	message string        // its message
	closed  bool          // tetherd closed the connection before the wait ran out
	after   time.Duration // from the first byte sent to the close
	replied bool          // a reply to the frame came: it was completed and served
}

// holdPartial dials tetherd and sends head, the beginning of a frame; then,
// if trickle is positive, the bytes of rest one at a time, every trickle. It
// waits until tetherd closes the connection or wait has passed.
func holdPartial(e *env, head, rest []byte, trickle, wait time.Duration) partialEnd {
	c, err := e.dial()
	if err != nil {
		return partialEnd{err: fmt.Errorf("dial tetherd: %w", err)}
	}
	defer c.close()
	start := time.Now()
	stopTrickle := make(chan struct{})
	defer close(stopTrickle)
	// A write that fails is tetherd closing the connection mid-frame (the
	// memory budget): what it answered is still read below.
	if _, err := c.conn.Write(head); err == nil && trickle > 0 {
		go func() {
			for i := range rest {
				select {
				case <-stopTrickle:
					return
				case <-time.After(trickle):
				}
				if _, err := c.conn.Write(rest[i : i+1]); err != nil {
					return
				}
			}
		}()
	}
	var end partialEnd
	for {
		left := time.Until(start.Add(wait))
		if left <= 0 {
			return end
		}
		rep, err := c.recv(left)
		switch {
		case err == nil && rep.ID == 0 && rep.Error() != nil:
			end.code, end.message = errCode(rep), fmt.Sprint(rep.Error()["message"])
		case err == nil:
			end.replied = true
		case peerClosed(err):
			end.closed, end.after = true, time.Since(start)
			return end
		case errors.Is(err, os.ErrDeadlineExceeded):
			return end
		default:
			end.err = fmt.Errorf("read tetherd's answer: %w", err)
			return end
		}
	}
}

// judgePartials reports and judges how connections holding partial frames
// ended: every one closed by tetherd, within client_frame_timeout plus
// slack, with a typed error naming the limit that closed it.
func judgePartials(t *memoryTrial, what string, ends []partialEnd) {
	afterByCode := map[string][]time.Duration{}
	var afters []time.Duration
	closed, replied, unnamed := 0, 0, 0
	var firstErr error
	for _, end := range ends {
		if end.err != nil && firstErr == nil {
			firstErr = end.err
		}
		if end.replied {
			replied++
		}
		if !end.closed {
			continue
		}
		closed++
		afters = append(afters, end.after)
		code := end.code
		if code == "" {
			code = "none"
		}
		afterByCode[code] = append(afterByCode[code], end.after)
		if !strings.Contains(end.message, "server.") {
			unnamed++
		}
	}
	_, _, slowest := durations(afters)
	codes := make([]string, 0, len(afterByCode))
	for code := range afterByCode {
		codes = append(codes, code)
	}
	sort.Strings(codes)
	var how []string
	for _, code := range codes {
		p50, _, mx := durations(afterByCode[code])
		how = append(how, fmt.Sprintf("%s × %d after %s s median, %s s at most", code, len(afterByCode[code]), seconds(p50), seconds(mx)))
	}
	t.stopped = fmt.Sprintf("%d of %d closed by tetherd: %s", closed, len(ends), strings.Join(how, "; "))
	if firstErr != nil {
		t.r.say("%s: the first attacker's own error: %v", t.name, firstErr)
	}
	bound := memoryFrameTimeout + memoryFrameSlack
	t.check(closed == len(ends) && slowest <= bound, "every %s closed by tetherd within client_frame_timeout + %s = %s (%d of %d; the last after %s s)",
		what, memoryFrameSlack, bound, closed, len(ends), seconds(slowest))
	t.check(replied == 0, "no %s was completed and served (%d)", what, replied)
	t.check(closed > 0 && unnamed == 0, "each closed %s got a typed error naming the limit (%d without)", what, unnamed)
}

// mountHalfSent is attack 1: n connections each hold half of a legal
// max_frame_bytes frame.
func mountHalfSent(t *memoryTrial, n int) error {
	frame, err := paddedQueryFrame(memoryMaxFrame)
	if err != nil {
		return err
	}
	head := frame[:wire.HeaderSize+memoryMaxFrame/2]
	ends := make([]partialEnd, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ends[i] = holdPartial(t.e, head, nil, 0, memoryFrameTimeout+15*time.Second)
		}()
	}
	wg.Wait()
	judgePartials(t, "half-sent frame", ends)
	// The budget closes the largest holders until tetherd is back under 90%
	// of it, no more: frames worth at least half of that (the rest may be
	// garbage not yet collected) must stay open until the frame timeout.
	held := int64(n) * memoryMaxFrame / 2
	if held > t.budget {
		spared := 0
		for _, end := range ends {
			if end.code == "bad_frame" {
				spared++
			}
		}
		least := int(float64(t.budget) * 0.9 / 2 / (memoryMaxFrame / 2))
		t.check(spared >= least, "max_memory_bytes closes only the excess: at least %d of the half-sent frames (half of 90%% "+
			"of max_memory_bytes) left to client_frame_timeout (%d were)", least, spared)
	}
	return nil
}

// paddedQueryFrame returns a whole frame whose payload is exactly size
// bytes: `SELECT LENGTH(?)` on maria, its string parameter padding it.
func paddedQueryFrame(size int) ([]byte, error) {
	build := func(pad int) []byte {
		b, st := wire.BeginFrame(nil)
		return wire.EndFrame(wire.AppendRequest(b, &wire.Request{ID: 1, Op: wire.OpQuery, Backend: "maria",
			SQL: "SELECT LENGTH(?)", Params: []any{strings.Repeat("x", pad)}}), st)
	}
	pad := size - 100
	pad += wire.HeaderSize + size - len(build(pad))
	f := build(pad)
	if len(f) != wire.HeaderSize+size {
		return nil, fmt.Errorf("build a frame of %d bytes: got %d", size, len(f)-wire.HeaderSize)
	}
	return f, nil
}

// mountSlowloris is attack 4: n connections at once, half sending 2 bytes
// of a ping frame's header and stopping, half sending the header and then
// one byte of the payload every 500 ms.
func mountSlowloris(t *memoryTrial, n int) error {
	b, st := wire.BeginFrame(nil)
	ping := wire.EndFrame(wire.AppendRequest(b, &wire.Request{ID: 1, Op: wire.OpPing}), st)
	ends := make([]partialEnd, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wait := memoryFrameTimeout + 15*time.Second
			if i%2 == 0 {
				ends[i] = holdPartial(t.e, ping[:2], nil, 0, wait)
			} else {
				ends[i] = holdPartial(t.e, ping[:wire.HeaderSize], ping[wire.HeaderSize:], 500*time.Millisecond, wait)
			}
		}()
	}
	wg.Wait()
	judgePartials(t, "slowloris connection", ends)
	return nil
}

// unreadEnd is how a connection that pipelined requests without reading
// ended.
type unreadEnd struct {
	err      error // dialing failed, or a write failed otherwise than by the close
	sent     int   // requests the socket took
	all      bool  // every request was taken
	closed   bool  // tetherd closed the connection
	lifetime time.Duration
	// stalled is, for a connection still open when the attack ended, how
	// long its socket had taken nothing: tetherd had paused reading it.
	stalled time.Duration
	// What was left in the socket, read only once the connection ended:
	// replies by code ("ok" for none), and the error tetherd closed it with.
	replies   map[string]int
	closeCode string
	closeMsg  string
}

// pipelineUnread dials tetherd and writes batch (perBatch frames) again and
// again, up to limit requests, reading nothing, until tetherd closes the
// connection or until passes. It then reads what was left for it in the
// socket, for at most drain.
func pipelineUnread(e *env, batch []byte, perBatch, limit int, until time.Time, drain time.Duration) unreadEnd {
	c, err := e.dial()
	if err != nil {
		return unreadEnd{err: fmt.Errorf("dial tetherd: %w", err)}
	}
	defer c.close()
	start := time.Now()
	var sent atomic.Int64
	var lastTaken atomic.Int64 // unix nanoseconds
	lastTaken.Store(start.UnixNano())
	writeErr := make(chan error, 1)
	go func() {
		for sent.Load() < int64(limit) {
			if _, err := c.conn.Write(batch); err != nil {
				writeErr <- err
				return
			}
			sent.Add(int64(perBatch))
			lastTaken.Store(time.Now().UnixNano())
		}
		writeErr <- nil
	}()
	end := unreadEnd{replies: map[string]int{}}
	timer := time.NewTimer(time.Until(until))
	defer timer.Stop()
	select {
	case err := <-writeErr:
		switch {
		case err == nil: // every request taken: it stays until the end
			end.all = true
			<-timer.C
			end.stalled = time.Since(time.Unix(0, lastTaken.Load()))
		case peerClosed(err):
			end.closed = true
		default:
			end.err = fmt.Errorf("write requests: %w", err)
		}
	case <-timer.C:
		end.stalled = time.Since(time.Unix(0, lastTaken.Load()))
	}
	end.lifetime = time.Since(start)
	end.sent = int(min(sent.Load(), int64(limit)))
	// What was left in the socket: read now that the attacker is done.
	deadline := time.Now().Add(drain)
	for time.Now().Before(deadline) {
		rep, err := c.recv(time.Until(deadline))
		if err != nil {
			if peerClosed(err) {
				end.closed = true
			}
			break
		}
		if rep.ID == 0 && rep.Error() != nil {
			end.closeCode, end.closeMsg = errCode(rep), fmt.Sprint(rep.Error()["message"])
			continue
		}
		code := errCode(rep)
		if code == "" {
			code = "ok"
		}
		end.replies[code]++
	}
	return end
}

// requestBatch returns n frames of r, numbered from 1, back to back.
func requestBatch(r wire.Request, n int) []byte {
	var b []byte
	for i := range n {
		r.ID = uint32(i + 1)
		var st int
		b, st = wire.BeginFrame(b)
		b = wire.EndFrame(wire.AppendRequest(b, &r), st)
	}
	return b
}

// mountNonReaders is attack 2: n clients pipeline queries with 1 MiB
// results on maria and never read a reply; each dials again when tetherd
// closes it, until d has passed.
func mountNonReaders(t *memoryTrial, n int, d time.Duration) error {
	const perBatch = 4
	batch := requestBatch(wire.Request{Op: wire.OpQuery, Backend: "maria", SQL: "SELECT REPEAT(?, ?) AS big",
		Params: []any{"x", int64(memoryBigResult)}}, perBatch)
	until := time.Now().Add(d)
	// No new connection in the last seconds: every one open at the end has
	// had the time to be paused.
	lastDial := until.Add(-memoryPausedAfter - time.Second)
	var mu sync.Mutex
	var ends []unreadEnd
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(lastDial) {
				end := pipelineUnread(t.e, batch, perBatch, 1<<30, until, time.Second)
				mu.Lock()
				ends = append(ends, end)
				mu.Unlock()
				if end.err != nil {
					time.Sleep(100 * time.Millisecond) // a client that cannot even dial does not spin
				}
			}
		}()
	}
	wg.Wait()
	closed, paused, unbounded, told := 0, 0, 0, 0
	mostSent := 0
	var lifetimes []time.Duration
	codes, replies := map[string]int{}, 0
	var firstErr error
	for _, end := range ends {
		if end.err != nil {
			if firstErr == nil {
				firstErr = end.err
			}
			continue
		}
		mostSent = max(mostSent, end.sent)
		for _, k := range end.replies {
			replies += k
		}
		switch {
		case end.closed:
			closed++
			lifetimes = append(lifetimes, end.lifetime)
			code := end.closeCode
			if code == "" {
				code = "none"
			}
			codes[code]++
			if strings.Contains(end.closeMsg, "server.") {
				told++
			}
		case end.stalled >= memoryPausedAfter:
			paused++
		default:
			unbounded++
		}
	}
	if firstErr != nil {
		t.r.say("%s: the first attacker's own error: %v", t.name, firstErr)
	}
	p50Life, _, _ := durations(lifetimes)
	t.stopped = fmt.Sprintf("%d connections: %d closed by tetherd (median life %s s; error before the close: %s), %d paused "+
		"(socket taking nothing for ≥ %s at the end), %d neither; at most %d requests taken by one connection's socket; "+
		"%d replies left in the sockets", len(ends), closed, seconds(p50Life), tally(codes), paused, memoryPausedAfter,
		unbounded, mostSent, replies)
	t.check(len(ends) > 0 && unbounded == 0 && firstErr == nil, "every non-reading connection disconnected or paused (%d of %d neither)",
		unbounded, len(ends))
	// tetherd counts these closes in a log line at most once a second.
	time.Sleep(1500 * time.Millisecond)
	if err := t.readLog(); err != nil {
		return err
	}
	named := t.logged["server.max_client_output_bytes"] + t.logged["server.max_memory_bytes"]
	t.check(closed == 0 || told == closed || named >= closed,
		"each non-reader tetherd closed was told why: a typed error or a log line naming the limit (%d closed, %d typed errors, %d named in log lines)",
		closed, told, named)
	return nil
}

// mountFlood is attack 3: one connection pipelines n `SELECT SLEEP(1)` on
// maria without reading, for d; then it reads what is left and leaves, and
// its statements must stop running on MariaDB.
func mountFlood(t *memoryTrial, n int, d time.Duration) error {
	const perBatch = 500
	batch := requestBatch(wire.Request{Op: wire.OpQuery, Backend: "maria", SQL: "SELECT SLEEP(1)"}, perBatch)
	end := pipelineUnread(t.e, batch, perBatch, n, time.Now().Add(d), 500*time.Millisecond)
	if end.err != nil {
		return fmt.Errorf("flood: %w", end.err)
	}
	// The connection is closed now (pipelineUnread returned): tetherd must
	// cancel what runs and drop what waits for a pool connection.
	left, most, stopped, err := waitNoSleeps(t.e, 5*time.Second)
	if err != nil {
		return err
	}
	state := fmt.Sprintf("paused: its socket had taken nothing for %s s at the end", seconds(end.stalled))
	if end.closed {
		state = fmt.Sprintf("closed by tetherd (%s %s)", end.closeCode, end.closeMsg)
	}
	t.stopped = fmt.Sprintf("%d of %d requests taken in %s s, then %s; %s replies were waiting in its socket; its "+
		"SLEEPs on MariaDB (at most %d running after it left) all gone %s s after", end.sent, n, seconds(d), state, tally(end.replies), most, seconds(stopped))
	t.check(end.closed || (!end.all && end.stalled >= memoryPausedAfter),
		"the flood was disconnected or paused, not read into tetherd (%d of %d requests taken; socket idle %s s at the end)",
		end.sent, n, seconds(end.stalled))
	t.check(left == 0, "the departed flood's statements stop running on MariaDB within 5 s (%d still running)", left)
	return nil
}

// waitNoSleeps waits, for at most wait, until no SLEEP statement of
// tetherd's user runs on MariaDB; it returns how many still ran at the end,
// the most seen at once, and how long it waited.
func waitNoSleeps(e *env, wait time.Duration) (left, most int, waited time.Duration, err error) {
	start := time.Now()
	for {
		var n int
		err := e.mysqlCount.QueryRowContext(context.Background(), "SELECT COUNT(*) FROM information_schema.PROCESSLIST "+
			"WHERE USER = SUBSTRING_INDEX(USER(), '@', 1) AND ID <> CONNECTION_ID() AND INFO LIKE 'SELECT SLEEP%'").Scan(&n)
		if err != nil {
			return 0, most, 0, fmt.Errorf("count SLEEP statements on MariaDB: %w", err)
		}
		most = max(most, n)
		if n == 0 || time.Since(start) >= wait {
			return n, most, time.Since(start), nil
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// tally formats counts by name, largest first.
func tally(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return m[keys[i]] > m[keys[j]] || m[keys[i]] == m[keys[j]] && keys[i] < keys[j] })
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s × %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.1f", d.Seconds()) }
