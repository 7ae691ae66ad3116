// Command relay is a TCP relay that delivers every chunk a fixed delay after it read it, each way, so that a
// database on this machine answers like one on another host (issue 20's two-host benchmark model).
//
//	relay -listen 127.0.0.1:13306 -target 127.0.0.1:3306 -delay 500us [-measure]
//	relay -check -delay 500us          # measure, check the guarantees, exit 1 if they do not hold
//
// Each direction of each connection is a pipe of constant latency: a chunk read at t is written at t+delay, in
// order, even while earlier chunks still wait; bandwidth is not limited. Deadlines are kept with a timerfd and a
// short spin (sleep.go), not Go's timers, which round a sub-millisecond sleep up to about
// 1.2 ms on this VM. An EOF is delayed like data and becomes a CloseWrite on the other side; any other
// error closes both sides.
//
// -measure first times ping-pongs through an in-process relay with the same delay to an in-process echo and
// prints the round trip it really gives, how late chunks went out and the relay's CPU per chunk, then serves
// (if -listen and -target are given).
// It prints "ready" on stdout once it listens. SIGTERM or SIGINT closes the listener and every connection, logs
// what was forwarded and the CPU it cost, and exits 0; a second signal exits at once.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	listen := flag.String("listen", "", "TCP address to accept connections on")
	target := flag.String("target", "", "TCP address to relay each connection to")
	delay := flag.Duration("delay", 500*time.Microsecond, "delay added to each chunk, each way")
	doMeasure := flag.Bool("measure", false, "measure the round trip the relay gives (to an in-process echo) before serving")
	check := flag.Bool("check", false, "measure, check the relay's guarantees, and exit (1 if they do not hold)")
	n := flag.Int("n", 2000, "ping-pongs for -measure and -check")
	tolerance := flag.Duration("tolerance", 150*time.Microsecond, "-check: most the median one-way delay may exceed -delay")
	flag.DurationVar(&spinMargin, "spin", spinMargin, "how long before a deadline a sender stops sleeping and spins")
	flag.Parse()
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)

	if *delay < 0 {
		log.Fatalf("relay: -delay %v: must not be negative", *delay)
	}
	if *doMeasure || *check {
		m, err := measure(*delay, *n)
		if err != nil {
			log.Fatalf("relay: measure: %v", err)
		}
		m.Sleep, m.SleepMeasure = measureSleep(100*time.Microsecond, 500), true
		fmt.Print(m.Report())
		if *check {
			if err := m.Check(*tolerance); err != nil {
				fmt.Printf("relay: check failed: %v\n", err)
				os.Exit(1)
			}
			fmt.Printf("relay: check ok: no chunk early, added round trip p50 within 2 x (%v + %v)\n", *delay, *tolerance)
			return
		}
	}
	if *listen == "" || *target == "" {
		if *doMeasure {
			return
		}
		log.Fatal("relay: -listen and -target are required (or -check)")
	}

	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		s := <-sigs
		log.Printf("relay: %v: closing (a second signal exits at once)", s)
		cancel()
		<-sigs
		os.Exit(1)
	}()

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatalf("relay: listen %s: %v", *listen, err)
	}
	r := &Relay{Target: *target, Delay: *delay}
	fmt.Println("ready")
	cpu0 := processCPU()
	err = r.Serve(ctx, ln)
	cpu := processCPU() - cpu0
	perChunk := time.Duration(0)
	if c := r.Stats.Chunks.Load(); c > 0 {
		perChunk = cpu / time.Duration(c)
	}
	log.Printf("relay: forwarded %s; CPU %v (%v per chunk)", r.Stats.String(), cpu.Round(time.Millisecond), perChunk)
	if err != nil {
		log.Fatalf("relay: %v", err)
	}
}
