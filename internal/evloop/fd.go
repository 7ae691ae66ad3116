//go:build linux

package evloop

import (
	"fmt"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// TakeFd duplicates a connection's socket as a non-blocking fd that Go's
// network poller does not know, for the event loop: a backend connection dialled and authenticated by a
// library, then driven by the loop (Watch). The caller closes nc afterwards
// and owns the returned fd.
func TakeFd(nc net.Conn) (int, error) {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return -1, fmt.Errorf("a connection of type %T cannot be driven by the event loop", nc)
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return -1, err
	}
	fd := -1
	var derr error
	if err := raw.Control(func(s uintptr) { fd, derr = unix.FcntlInt(s, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return -1, err
	}
	if derr != nil {
		return -1, fmt.Errorf("dup socket: %w", derr)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}
