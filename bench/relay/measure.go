package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"runtime"
	"slices"
	"strings"
	"time"
)

// pingSize is the size of a measurement ping: a small query's worth.
const pingSize = 64

// Measurement is what measure found: round trips straight to an echo and through a relay to it, the relay's
// lateness per chunk, and the relay's CPU per forwarded chunk.
type Measurement struct {
	Delay        time.Duration
	N            int
	Direct       []time.Duration // round trips without the relay, sorted
	Relayed      []time.Duration // round trips through the relay, sorted
	Stats        *Stats          // the measuring relay's: lateness per chunk
	CPUPerChunk  time.Duration   // process CPU through the relay less the same pings direct, per chunk forwarded
	Sleep        sleepPrecision
	SleepMeasure bool
}

// quantile returns quantile q of sorted durations (nearest rank).
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	i = max(0, min(i, len(sorted)-1))
	return sorted[i]
}

// measure runs n ping-pongs of pingSize bytes to an in-process echo, first directly and then through an
// in-process Relay with the given delay, and returns both round trips and what the relay cost.
func measure(delay time.Duration, n int) (*Measurement, error) {
	echo, err := startEcho()
	if err != nil {
		return nil, err
	}
	defer echo.Close()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen for the measuring relay: %w", err)
	}
	r := &Relay{Target: echo.Addr().String(), Delay: delay, Log: log.New(io.Discard, "", 0)}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- r.Serve(ctx, ln) }()
	defer func() { cancel(); <-served }()

	m := &Measurement{Delay: delay, N: n, Stats: &r.Stats}
	cpu0 := processCPU()
	if m.Direct, err = pingPong(echo.Addr().String(), n); err != nil {
		return nil, fmt.Errorf("ping the echo directly: %w", err)
	}
	cpu1 := processCPU()
	if m.Relayed, err = pingPong(ln.Addr().String(), n); err != nil {
		return nil, fmt.Errorf("ping the echo through the relay: %w", err)
	}
	cpu2 := processCPU()
	if chunks := r.Stats.Chunks.Load(); chunks > 0 {
		m.CPUPerChunk = max(0, (cpu2-cpu1)-(cpu1-cpu0)) / time.Duration(chunks)
	}
	slices.Sort(m.Direct)
	slices.Sort(m.Relayed)
	return m, nil
}

// startEcho listens on a loopback port and echoes every connection until closed.
func startEcho() (net.Listener, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen for the echo: %w", err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if _, err := io.Copy(c, c); err == nil {
					c.(*net.TCPConn).CloseWrite()
				}
			}()
		}
	}()
	return ln, nil
}

// pingPong dials addr and times n round trips of pingSize bytes, one after the other.
func pingPong(addr string, n int) ([]time.Duration, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	defer c.Close()
	out := make([]byte, pingSize)
	in := make([]byte, pingSize)
	rtts := make([]time.Duration, 0, n)
	for i := range n {
		out[0] = byte(i)
		t0 := time.Now()
		if _, err := c.Write(out); err != nil {
			return nil, fmt.Errorf("write ping %d: %w", i, err)
		}
		if _, err := io.ReadFull(c, in); err != nil {
			return nil, fmt.Errorf("read pong %d: %w", i, err)
		}
		rtts = append(rtts, time.Since(t0))
		if in[0] != out[0] {
			return nil, fmt.Errorf("pong %d: got byte %d, want %d", i, in[0], out[0])
		}
	}
	return rtts, nil
}

// Report is the measurement as the benchmark prints it.
func (m *Measurement) Report() string {
	var b strings.Builder
	us := func(d time.Duration) string { return fmt.Sprintf("%.0fus", float64(d)/float64(time.Microsecond)) }
	addP50 := quantile(m.Relayed, 0.5) - quantile(m.Direct, 0.5)
	// The direct round trip's median, not its p99, is subtracted from the relayed p99: the two tails are
	// different events, and their difference can be negative.
	addP99 := quantile(m.Relayed, 0.99) - quantile(m.Direct, 0.5)
	fmt.Fprintf(&b, "relay: delay %v each way, %d round trips of %d bytes to an in-process echo\n", m.Delay, m.N, pingSize)
	fmt.Fprintf(&b, "relay: round trip through the relay p50 %s p99 %s min %s; direct p50 %s p99 %s\n",
		us(quantile(m.Relayed, 0.5)), us(quantile(m.Relayed, 0.99)), us(m.Relayed[0]),
		us(quantile(m.Direct, 0.5)), us(quantile(m.Direct, 0.99)))
	fmt.Fprintf(&b, "relay: added round trip (relayed less direct p50) p50 %s p99 %s, i.e. one way p50 %s p99 %s (set %s)\n",
		us(addP50), us(addP99), us(addP50/2), us(addP99/2), us(m.Delay))
	fmt.Fprintf(&b, "relay: each chunk written after its deadline by p50 %s p99 %s max %s; early: %d\n",
		us(m.Stats.Late.quantile(0.5)), us(m.Stats.Late.quantile(0.99)),
		us(time.Duration(m.Stats.Late.max.Load())), m.Stats.Late.early.Load())
	fmt.Fprintf(&b, "relay: relay CPU %.1fus per forwarded chunk (process CPU through the relay less the same pings direct)\n",
		float64(m.CPUPerChunk)/float64(time.Microsecond))
	if m.SleepMeasure {
		b.WriteString(m.Sleep.String())
	}
	return b.String()
}

// Check returns an error unless the measurement shows what the relay promises: no round trip shorter than twice
// the delay (a chunk is never early), and the added round trip's median within 2 x tolerance of twice the delay.
func (m *Measurement) Check(tolerance time.Duration) error {
	if min := m.Relayed[0]; min < 2*m.Delay {
		return fmt.Errorf("a round trip took %v, less than twice the delay %v", min, m.Delay)
	}
	if e := m.Stats.Late.early.Load(); e > 0 {
		return fmt.Errorf("%d chunks written before their deadline", e)
	}
	added := quantile(m.Relayed, 0.5) - quantile(m.Direct, 0.5)
	if added > 2*(m.Delay+tolerance) {
		return fmt.Errorf("added round trip p50 %v, more than 2 x (delay %v + tolerance %v)", added, m.Delay, tolerance)
	}
	return nil
}

// sleepPrecision is how late each way of sleeping wakes for the same short sleep.
type sleepPrecision struct {
	d, n                                                 int
	goTimer, nanosleepSlack, nanosleep, timerfd, precise []time.Duration
}

// measureSleep sleeps n times d each way and returns the sorted overshoots.
func measureSleep(d time.Duration, n int) sleepPrecision {
	sp := sleepPrecision{d: int(d / time.Microsecond), n: n}
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Locked, so that the slack set for one series stays with the thread that sleeps.
		runtime.LockOSThread()
		setTimerSlack(1)
		run := func(f func(time.Time)) []time.Duration {
			out := make([]time.Duration, 0, n)
			for range n {
				due := time.Now().Add(d)
				f(due)
				out = append(out, time.Since(due))
			}
			slices.Sort(out)
			return out
		}
		sp.goTimer = run(func(due time.Time) { time.Sleep(time.Until(due)) })
		sp.nanosleep = run(nanosleepUntil)
		if tm, err := newDeadlineTimer(); err == nil {
			sp.timerfd = run(tm.wait)
			sp.precise = run(tm.sleepUntil)
			tm.Close()
		}
		// The kernel's default slack, for comparison (not "0: the thread's default", which a thread inherits from
		// the one that created it).
		setTimerSlack(50_000)
		sp.nanosleepSlack = run(nanosleepUntil)
	}()
	<-done
	return sp
}

func (sp sleepPrecision) String() string {
	var b strings.Builder
	line := func(name string, s []time.Duration) {
		if len(s) == 0 {
			return
		}
		fmt.Fprintf(&b, "relay: sleep %dus x %d, %-40s late p50 %6.1fus p99 %6.1fus max %7.1fus\n", sp.d, sp.n, name,
			float64(quantile(s, 0.5))/1e3, float64(quantile(s, 0.99))/1e3, float64(s[len(s)-1])/1e3)
	}
	line("time.Sleep", sp.goTimer)
	line("clock_nanosleep, timer slack 50us", sp.nanosleepSlack)
	line("clock_nanosleep, timer slack 1ns", sp.nanosleep)
	line("timerfd in the netpoller", sp.timerfd)
	line("deadlineTimer (timerfd + spin)", sp.precise)
	return b.String()
}
