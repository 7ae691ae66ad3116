//go:build linux

package httpup_test

import (
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// waitSent returns once the peer's kernel has acknowledged every byte
// written to c (SIOCOUTQ is 0), so that a reset sent next cannot discard
// them: an RST drops what is still in the sender's queue, while the peer
// reads what it already has before it sees the reset. No event tells a
// sender that, so it polls, for at most 5 s.
func waitSent(c net.Conn) {
	rc, err := c.(syscall.Conn).SyscallConn()
	if err != nil {
		return
	}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		n := -1
		rc.Control(func(fd uintptr) { n, _ = unix.IoctlGetInt(int(fd), unix.SIOCOUTQ) })
		if n == 0 {
			return
		}
	}
}
