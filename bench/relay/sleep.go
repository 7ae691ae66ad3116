package main

import (
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// spinMargin is how long before a deadline a deadlineTimer stops sleeping in the kernel and spins on the clock.
//
// Measured on this VM (2 vCPUs, KVM, 2026-11-27, while a CI run kept the load average at 4-10; `relay -measure`
// prints the same table), sleeps of 100 us on one thread, how late they woke, p50 / p99:
//
//	time.Sleep                                     +1,000 us / +2,200 us and more (Go's timers)
//	clock_nanosleep, absolute, timer slack 50 us   +67 to +84 us / +230 us and more (the kernel's default slack)
//	clock_nanosleep, absolute, timer slack 1 ns    +13 to +29 us / +130 us and more (waking a thread)
//	a timerfd in Go's netpoller                    +24 to +44 us / +550 us and more (no slack; the netpoller)
//	a timerfd, waking 30 us early and spinning     +0.3 to +17 us / +90 us and more
//
// So a sender wakes spinMargin early and spins to the deadline: the deadline is met to about 1 us whenever the
// wake-up takes less than spinMargin, and the spin costs at most spinMargin of CPU a chunk, never a whole delay.
// Through the relay (500 us, 2000-3000 ping-pongs), chunks went out p50 1 us late with the spin (27 us without),
// for about the same CPU per chunk: the spin replaces some of the wake-up's cost. Under heavier load than above
// the wake-up exceeds the margin more often; -measure says how often ("written after its deadline").
var spinMargin = 30 * time.Microsecond

// clockBase ties Go's monotonic clock (time.Now) to CLOCK_MONOTONIC, which the kernel's timers take: on Linux
// both read the same clock, but Go hides the raw value, so the offset is taken once, at start.
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

// monoTimespec returns t on CLOCK_MONOTONIC.
func monoTimespec(t time.Time) unix.Timespec {
	return unix.NsecToTimespec(clockBase.mono + int64(t.Sub(clockBase.t)))
}

// deadlineTimer sleeps a goroutine until a deadline precisely: a timerfd (CLOCK_MONOTONIC, absolute, no timer
// slack) read through Go's netpoller until spinMargin before the deadline, then a spin. One goroutine uses it at
// a time.
//
// Why a timerfd, not clock_nanosleep on a thread locked to it (the first version): the two wake as precisely, but
// a goroutine in a 500 us clock_nanosleep holds its P in a system call, which keeps the runtime's sysmon thread
// polling every 20 us to retake it (30% of the relay's CPU in a profile), and a locked thread adds a hand-off of
// the P on every chunk. Relay process alone, pinned to one CPU, 3000 ping-pongs through it, CPU per chunk, three
// runs each: 500 us: timerfd 105-127 us, clock_nanosleep (unlocked, 1 ns slack) 136-146 us; 100 us: 68-86 us
// and 79-82 us; locked threads cost more still (100 against 60 us in-process at GOMAXPROCS=1). What remains is the
// write through loopback TCP (about a quarter), the scheduler, and sysmon woken each time the process leaves idle.
type deadlineTimer struct {
	fd int
	f  *os.File // owns fd; reads park the goroutine in the netpoller
}

// newDeadlineTimer returns a timer holding one file descriptor until Close.
func newDeadlineTimer() (*deadlineTimer, error) {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("timerfd_create: %w", err)
	}
	return &deadlineTimer{fd: fd, f: os.NewFile(uintptr(fd), "timerfd")}, nil
}

// Close releases the timer's file descriptor.
func (t *deadlineTimer) Close() error { return t.f.Close() }

// sleepUntil returns at deadline or at most a clock read after it, never before it.
func (t *deadlineTimer) sleepUntil(deadline time.Time) {
	if time.Until(deadline) > spinMargin {
		t.wait(deadline.Add(-spinMargin))
	}
	for time.Now().Before(deadline) {
	}
}

// wait returns once the timer has fired at deadline. If the timerfd fails (it should not), it sleeps with
// clock_nanosleep instead, so that sleepUntil never spins a whole delay.
func (t *deadlineTimer) wait(deadline time.Time) {
	its := unix.ItimerSpec{Value: monoTimespec(deadline)}
	if err := unix.TimerfdSettime(t.fd, unix.TFD_TIMER_ABSTIME, &its, nil); err != nil {
		nanosleepUntil(deadline)
		return
	}
	var expirations [8]byte
	if _, err := t.f.Read(expirations[:]); err != nil {
		nanosleepUntil(deadline)
	}
}

// setTimerSlack sets the calling thread's timer slack in ns, for measureSleep's comparison of clock_nanosleep.
func setTimerSlack(ns uintptr) {
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, ns, 0, 0, 0)
}

// nanosleepUntil sleeps with clock_nanosleep until deadline (to the thread's timer slack), for measureSleep.
func nanosleepUntil(deadline time.Time) {
	ts := monoTimespec(deadline)
	// EINTR comes from the runtime's preemption signals: sleep again, to the same absolute time.
	for unix.ClockNanosleep(unix.CLOCK_MONOTONIC, unix.TIMER_ABSTIME, &ts, nil) == unix.EINTR {
	}
}
