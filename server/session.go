package server

import (
	"context"
	"sync"
	"sync/atomic"

	tether "github.com/tether-php/tether"
	"github.com/tether-php/tether/backend/sqlpool"
	"github.com/tether-php/tether/internal/evloop"
	"github.com/tether-php/tether/wire"
)

// sessionSeq numbers client connections (ClientRef.Conn), from 1.
var sessionSeq atomic.Uint64

// session is the server's state for one client connection.
type session struct {
	conn   *evloop.Conn
	tcp    bool
	client ClientRef    // who it is, read once at open (identify)
	authed bool         // loop goroutine only
	req    wire.Request // decode scratch; loop goroutine only

	// ctx is canceled when the client goes away, which cancels its requests.
	ctx    context.Context
	cancel context.CancelFunc

	// The bounds of issue "what one client can make tetherd hold"; the
	// times are the server's coarse clock (Server.clock). Loop goroutine
	// only, but pending.
	opened       int64        // when the connection was accepted
	lastActive   int64        // when its last frame came
	partialSince int64        // when the partial frame it holds began; 0: none
	partialHeld  int          // the bytes of that partial frame taken in so far (for the memory budget)
	pending      atomic.Int32 // requests handed off and not yet answered
	served       uint64       // frames read (tether clients)
	beginning    atomic.Int32 // begins not yet answered (max_client_txs counts them)

	// clients holds the session's pooled state (its session settings) on each
	// loop backend it used; loop goroutine only.
	clients map[*liveBackend]*sqlpool.Client

	mu      sync.Mutex
	closed  bool
	txs     map[uint64]*txState
	aborted map[uint64]string // transactions the server rolled back, with why
}

const maxAbortedRemembered = 64

// lookupTx returns the open transaction id of this session, or the error to
// send: tx_aborted for one the server rolled back, unknown_tx otherwise.
func (ss *session) lookupTx(id uint64) (*txState, *tether.Error) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if t, ok := ss.txs[id]; ok {
		return t, nil
	}
	if why, ok := ss.aborted[id]; ok {
		return nil, &tether.Error{Code: tether.CodeTxAborted, Message: "transaction was rolled back: " + why, Retry: true}
	}
	return nil, tether.Errorf(tether.CodeUnknownTx, "no open transaction %d on this connection", id)
}

// openTxs returns how many transactions the session has open.
func (ss *session) openTxs() int {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return len(ss.txs)
}

// identify numbers the connection and reads who is at its other end (the
// process's pid and uid for a Unix socket, the address for TCP), once, so
// that a request's errors can name their client from any goroutine. Loop
// goroutine only, at open.
func (ss *session) identify() {
	pid, uid, addr := ss.conn.Peer()
	ss.client = ClientRef{Conn: sessionSeq.Add(1), PID: pid, UID: uid, Addr: addr, TCP: ss.tcp}
}
