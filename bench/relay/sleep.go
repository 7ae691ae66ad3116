package main

import (
	"time"

	"golang.org/x/sys/unix"
)

// spinMargin is how long before a deadline sleepUntil stops sleeping in the kernel and spins on the clock.
//
// Measured on this VM (2 vCPUs, KVM, 2026-11-27, while a CI run kept the load average at 4-5; `relay -measure`
// prints the same table), sleeps of 100 us, how late they woke, p50 / p99:
//
//	time.Sleep                                     +1,010 us / +4,100 us (Go's timers)
//	clock_nanosleep, absolute, default timer slack    +65 us / +530 us and more (the 50 us slack, then load)
//	clock_nanosleep, absolute, timer slack 1 ns       +11 to +20 us / +300 us and more (waking a thread)
//	the same, waking 30 us early and spinning          +0.2 us / the load's spikes
//
// So sleepUntil sets its thread's timer slack to 1 ns, wakes spinMargin early and spins to the deadline: the
// deadline is met to about 1 us whenever the wake-up takes less than spinMargin, and the spin costs at most
// spinMargin of CPU a chunk, never a whole delay. Through the relay (500 us, 3000 ping-pongs, GOMAXPROCS=1),
// chunks went out p50 27 us late without the spin and 1 us with 30 us of it, for about the same CPU per chunk
// (60 and 59 us: the spin replaces some of the wake-up's cost).
var spinMargin = 30 * time.Microsecond

// clockBase ties Go's monotonic clock (time.Now) to CLOCK_MONOTONIC, which clock_nanosleep takes: on Linux both
// read the same clock, but Go hides the raw value, so the offset is taken once, at start.
var clockBase = newMonoBase()

type monoBase struct {
	t    time.Time // a Go time ...
	mono int64     // ... and CLOCK_MONOTONIC in ns at the same instant (to within a clock read)
}

func newMonoBase() monoBase {
	var ts unix.Timespec
	t0 := time.Now()
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic("clock_gettime(CLOCK_MONOTONIC): " + err.Error())
	}
	t1 := time.Now()
	return monoBase{t: t0.Add(t1.Sub(t0) / 2), mono: ts.Nano()}
}

// setTimerSlack sets the calling thread's timer slack in ns (0: back to the process default). It is best effort:
// without it a sleep wakes up to 50 us later, which spinMargin partly absorbs.
func setTimerSlack(ns uintptr) {
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, ns, 0, 0, 0)
}

// sleepUntil returns at deadline or at most a clock read after it, never before it. It sleeps in the kernel
// (clock_nanosleep, absolute, CLOCK_MONOTONIC, timer slack 1 ns) until spinMargin before the deadline and spins
// from there. The kernel sleep holds a runtime thread, not a P: other goroutines run meanwhile.
//
// The goroutine is not locked to its thread (runtime.LockOSThread), although the timer slack is a thread's
// setting: a locked sender measured as precise but cost twice the CPU per chunk (122 against 97 us at
// GOMAXPROCS=2, 100 against 60 at GOMAXPROCS=1, 500 us delay, spin 0), since every chunk that wakes a locked
// goroutine hands the P to its thread and back. Setting the slack before each sleep costs one prctl (~1 us); a
// preemption between it and the sleep at worst gives that one sleep the default slack.
func sleepUntil(deadline time.Time) {
	if time.Until(deadline) > spinMargin {
		setTimerSlack(1)
		kernelSleepUntil(deadline.Add(-spinMargin))
	}
	for time.Now().Before(deadline) {
	}
}

// kernelSleepUntil sleeps with clock_nanosleep until deadline (to the thread's timer slack), without spinning.
func kernelSleepUntil(deadline time.Time) {
	ts := unix.NsecToTimespec(clockBase.mono + int64(deadline.Sub(clockBase.t)))
	// EINTR comes from the runtime's preemption signals: sleep again, to the same absolute time.
	for unix.ClockNanosleep(unix.CLOCK_MONOTONIC, unix.TIMER_ABSTIME, &ts, nil) == unix.EINTR {
	}
}
