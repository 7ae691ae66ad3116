// Command sleepd is the slow upstream of benchmark E5 (bench/fanout): an HTTP server whose one real endpoint
// sleeps before it answers, so that ten calls to it take one sleep when they run in parallel and ten when they do
// not. It serves any number of requests at once (one goroutine each) and keeps connections alive.
//
//	sleepd -listen 127.0.0.1:0 -addr-file var/bench/fanout/sleepd.addr
//
// Endpoints (GET):
//
//	/sleep?ms=N&i=K   sleeps N ms (0..60000), then answers 200 text/plain "slept N ms i=K\n"
//	                  (K is echoed so that a caller can check which reply belongs to which call)
//	/stats            {"requests":R,"in_flight":F,"max_in_flight":M}: requests served since start or the last reset,
//	                  and the most /sleep requests in progress at once
//	/stats?reset=1    the same, then sets requests and max_in_flight to zero
//
// It writes its listening address (host:port) to -addr-file once it listens, so a port of 0 picks a free one;
// SIGTERM or SIGINT stops it (in-flight requests get 2 s).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// stats counts the /sleep requests.
type stats struct {
	mu          sync.Mutex
	requests    int
	inFlight    int
	maxInFlight int
}

func (s *stats) begin() {
	s.mu.Lock()
	s.requests++
	s.inFlight++
	s.maxInFlight = max(s.maxInFlight, s.inFlight)
	s.mu.Unlock()
}

func (s *stats) end() {
	s.mu.Lock()
	s.inFlight--
	s.mu.Unlock()
}

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on (port 0: any free port)")
	addrFile := flag.String("addr-file", "", "write the address listened on to this file")
	flag.Parse()

	var st stats
	mux := http.NewServeMux()
	mux.HandleFunc("GET /sleep", func(w http.ResponseWriter, r *http.Request) {
		ms, err := strconv.Atoi(r.URL.Query().Get("ms"))
		if err != nil || ms < 0 || ms > 60000 {
			http.Error(w, "ms: want 0..60000", http.StatusBadRequest)
			return
		}
		st.begin()
		defer st.end()
		select {
		case <-time.After(time.Duration(ms) * time.Millisecond):
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintf(w, "slept %d ms i=%s\n", ms, r.URL.Query().Get("i"))
	})
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, r *http.Request) {
		st.mu.Lock()
		body := fmt.Sprintf(`{"requests":%d,"in_flight":%d,"max_in_flight":%d}`, st.requests, st.inFlight, st.maxInFlight)
		if r.URL.Query().Get("reset") == "1" {
			st.requests, st.maxInFlight = 0, st.inFlight
		}
		st.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintln(w, body)
	})

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatalf("sleepd: listen %s: %v", *listen, err)
	}
	if *addrFile != "" {
		// Written to a temporary name and renamed, so a reader never sees half an address.
		tmp := *addrFile + ".tmp"
		if err := os.WriteFile(tmp, []byte(ln.Addr().String()+"\n"), 0o644); err != nil {
			log.Fatalf("sleepd: write %s: %v", tmp, err)
		}
		if err := os.Rename(tmp, *addrFile); err != nil {
			log.Fatalf("sleepd: rename %s: %v", tmp, err)
		}
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 5 * time.Minute}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Fatalf("sleepd: serve: %v", err)
	}
}
