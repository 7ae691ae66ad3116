package tether

import (
	"context"
	"sync"
	"time"

	"github.com/tether-php/tether/internal/evloop"
	"github.com/tether-php/tether/wire"
)

// session is the server's state for one client connection.
type session struct {
	conn   *evloop.Conn
	tcp    bool
	authed bool         // loop goroutine only
	req    wire.Request // decode scratch; loop goroutine only

	// ctx is canceled when the client goes away, which cancels its requests.
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	closed  bool
	txs     map[uint64]*txState
	aborted map[uint64]string // transactions the server rolled back, with why
}

const maxAbortedRemembered = 64

// lookupTx returns the open transaction id of this session, or the error to
// send: tx_aborted for one the server rolled back, unknown_tx otherwise.
func (ss *session) lookupTx(id uint64) (*txState, *Error) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if t, ok := ss.txs[id]; ok {
		return t, nil
	}
	if why, ok := ss.aborted[id]; ok {
		return nil, &Error{Code: CodeTxAborted, Message: "transaction was rolled back: " + why, Retry: true}
	}
	return nil, Errorf(CodeUnknownTx, "no open transaction %d on this connection", id)
}

// txState is one open transaction: a Tx pinned to a backend connection, owned
// by one session. Its operations run one at a time, in the order the client
// sent them, on a goroutine that exists only while work is queued.
type txState struct {
	id      uint64
	backend string
	owner   *session
	tx      Tx

	mu       sync.Mutex
	queue    []func()
	running  bool
	lastUsed time.Time
	ended    *Error // set once the transaction is over; later ops get it
}

// submit queues op to run after every op submitted before it. The server's
// in-flight count covers it until it has run.
func (t *txState) submit(s *Server, op func()) {
	s.inflight.Add(1)
	t.mu.Lock()
	t.queue = append(t.queue, op)
	if t.running {
		t.mu.Unlock()
		return
	}
	t.running = true
	t.mu.Unlock()
	go t.drain(s)
}

func (t *txState) drain(s *Server) {
	for {
		t.mu.Lock()
		if len(t.queue) == 0 {
			t.running = false
			t.lastUsed = time.Now()
			t.mu.Unlock()
			return
		}
		op := t.queue[0]
		t.queue[0] = nil
		t.queue = t.queue[1:]
		t.mu.Unlock()
		op()
		s.inflight.Done()
	}
}

// endedErr returns why the transaction is over, or nil while it is open.
func (t *txState) endedErr() *Error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.ended
}

// idleSince reports whether the transaction has had nothing to do since before
// cutoff.
func (t *txState) idleSince(cutoff time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return !t.running && len(t.queue) == 0 && t.ended == nil && t.lastUsed.Before(cutoff)
}
