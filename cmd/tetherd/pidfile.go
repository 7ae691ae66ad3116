package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// pidFile is server.pid_file: the pid of the tetherd that serves, for
// scripts and `kill -HUP` (tether reload is the better way). It is
// written once tetherd serves on its sockets, by each new process of a
// binary upgrade in its turn, and removed on a clean exit; an old process
// that handed its sockets to a new one leaves it (it holds the new pid).
type pidFile struct {
	path string // "" when none is configured
	tmp  string
}

// preparePIDFile writes this process's pid to a file beside path, to be put
// in place by commit once tetherd is ready: a directory that cannot take it
// fails the start here, before any socket is taken over.
func preparePIDFile(path string) (*pidFile, error) {
	p := &pidFile{path: path}
	if path == "" {
		return p, nil
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return nil, fmt.Errorf("server.pid_file %s: %w", path, err)
	}
	p.tmp = f.Name()
	_, err = fmt.Fprintf(f, "%d\n", os.Getpid())
	if err == nil {
		err = f.Chmod(0o644)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(p.tmp)
		return nil, fmt.Errorf("server.pid_file %s: %w", path, err)
	}
	return p, nil
}

// commit puts the pid file in place (a rename: a reader sees the old pid or
// the new one, never a partial file).
func (p *pidFile) commit() error {
	if p.path == "" {
		return nil
	}
	if err := os.Rename(p.tmp, p.path); err != nil {
		os.Remove(p.tmp)
		return fmt.Errorf("server.pid_file %s: %w", p.path, err)
	}
	p.tmp = ""
	return nil
}

// remove deletes the pid file if it still holds this process's pid (after an
// upgrade it holds the new process's), and a temporary file never committed.
func (p *pidFile) remove() {
	if p.tmp != "" {
		os.Remove(p.tmp)
		p.tmp = ""
	}
	if p.path == "" {
		return
	}
	if b, err := os.ReadFile(p.path); err == nil && string(bytes.TrimSpace(b)) == strconv.Itoa(os.Getpid()) {
		os.Remove(p.path)
	}
}

// handedOver waits, up to timeout, for the pid file to hold another pid than
// this process's: the new process of an upgrade writes it just after it is
// ready, and this one leaves only once it has (so that the file never names
// a process that is gone). It reports whether it saw that.
func (p *pidFile) handedOver(timeout time.Duration) bool {
	if p.path == "" {
		return true
	}
	me := strconv.Itoa(os.Getpid())
	deadline := time.Now().Add(timeout)
	for {
		b, err := os.ReadFile(p.path)
		if err == nil && string(bytes.TrimSpace(b)) != me {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
}
