// Command testupstream is the HTTP upstream of the PHP integration tests and
// of the examples: a real server on loopback with the endpoints whose
// outcomes the http operation must type (scripts/test.sh starts it).
//
//	GET|POST /echo        200; the request body as the body, the method in x-echo-method, the request URI in
//	                      x-echo-uri, each request header X as x-echo-header-X
//	GET /sleep?ms=N       sleeps N ms (or until the client goes away), then 200 "slept N"
//	GET /status/N         status N, body "status N"
//	GET /reset            closes the connection with a TCP reset before answering
//	GET /huge?bytes=N     200 with N bytes of 'x'
//	GET /conns            the number of connections accepted so far, as decimal text
//
// Usage: testupstream -listen 127.0.0.1:0 -addr-file FILE (the address it got is written to FILE).
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	addrFile := flag.String("addr-file", "", "write the address listened on to this file")
	flag.Parse()

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	if *addrFile != "" {
		if err := os.WriteFile(*addrFile, []byte(ln.Addr().String()), 0o644); err != nil {
			log.Fatal(err)
		}
	}
	var conns atomic.Int64
	srv := &http.Server{
		Handler:           handler(&conns),
		ReadHeaderTimeout: 10 * time.Second,
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				conns.Add(1)
			}
		},
	}
	log.Printf("testupstream: listening on %s", ln.Addr())
	log.Fatal(srv.Serve(ln))
}

func handler(conns *atomic.Int64) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		h := w.Header()
		h.Set("X-Echo-Method", r.Method)
		h.Set("X-Echo-Uri", r.RequestURI)
		for name, values := range r.Header {
			h["X-Echo-Header-"+name] = values
		}
		h.Set("Content-Type", "application/octet-stream")
		w.Write(body)
	})
	mux.HandleFunc("/sleep", func(w http.ResponseWriter, r *http.Request) {
		ms, _ := strconv.Atoi(r.URL.Query().Get("ms"))
		select {
		case <-time.After(time.Duration(ms) * time.Millisecond):
			fmt.Fprintf(w, "slept %d", ms)
		case <-r.Context().Done():
		}
	})
	mux.HandleFunc("/status/", func(w http.ResponseWriter, r *http.Request) {
		code, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/status/"))
		if err != nil || code < 200 || code > 599 {
			http.Error(w, "bad status", http.StatusBadRequest)
			return
		}
		w.WriteHeader(code)
		fmt.Fprintf(w, "status %d", code)
	})
	mux.HandleFunc("/reset", func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		if tc, ok := conn.(*net.TCPConn); ok {
			tc.SetLinger(0) // close sends RST, not FIN
		}
		conn.Close()
	})
	mux.HandleFunc("/huge", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("bytes"))
		chunk := bytes.Repeat([]byte("x"), 64<<10)
		for n > 0 {
			m := min(n, len(chunk))
			if _, err := w.Write(chunk[:m]); err != nil {
				return
			}
			n -= m
		}
	})
	mux.HandleFunc("/conns", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, conns.Load())
	})
	return mux
}
