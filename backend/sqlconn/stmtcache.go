package sqlconn

// StmtCache keeps a connection's prepared statements by SQL text, at most
// its size of them: the least recently used is closed on the server when a
// new one comes past it. S is the protocol's statement (a pointer). Loop
// goroutine only, like its connection; not to be copied once Init ran (its
// list points into it).
type StmtCache[S comparable] struct {
	size  int
	m     map[string]*cached[S]
	head  cached[S] // sentinel of the ring: head.next is the most recently used
	close func(S)
}

type cached[S comparable] struct {
	sql        string
	st         S
	prev, next *cached[S]
}

// Init empties the cache and sets its size (at least 1) and close, which
// closes a statement on the server (writes the protocol's close after
// whatever was written before, which may still use it).
func (s *StmtCache[S]) Init(size int, close func(S)) {
	s.size = max(size, 1)
	s.m = make(map[string]*cached[S])
	s.head.prev, s.head.next = &s.head, &s.head
	s.close = close
}

// Get returns the statement cached for sql and marks it used; the zero S
// when there is none.
func (s *StmtCache[S]) Get(sql string) S {
	e := s.m[sql]
	if e == nil {
		var zero S
		return zero
	}
	s.unlink(e)
	s.pushFront(e)
	return e.st
}

// Put caches st, prepared for sql, as the most recently used. A statement
// cached for sql already (the same text prepared again for two requests
// written before either answer, each a retry) is replaced and closed; past
// the size, the least recently used is closed.
func (s *StmtCache[S]) Put(sql string, st S) {
	if old := s.m[sql]; old != nil {
		s.unlink(old)
		delete(s.m, sql)
		s.close(old.st)
	}
	e := &cached[S]{sql: sql, st: st}
	s.pushFront(e)
	s.m[sql] = e
	for len(s.m) > s.size {
		victim := s.head.prev
		s.unlink(victim)
		delete(s.m, victim.sql)
		s.close(victim.st)
	}
}

// Remove forgets st and closes it, if it is the statement cached for sql,
// and reports whether it was.
func (s *StmtCache[S]) Remove(sql string, st S) bool {
	e := s.m[sql]
	if e == nil || e.st != st {
		return false
	}
	s.unlink(e)
	delete(s.m, sql)
	s.close(st)
	return true
}

// Clear forgets every statement without closing any (the server dropped
// them).
func (s *StmtCache[S]) Clear() {
	clear(s.m)
	s.head.prev, s.head.next = &s.head, &s.head
}

// Len returns how many statements are cached.
func (s *StmtCache[S]) Len() int { return len(s.m) }

func (s *StmtCache[S]) unlink(e *cached[S]) {
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
}

func (s *StmtCache[S]) pushFront(e *cached[S]) {
	e.prev, e.next = &s.head, s.head.next
	s.head.next.prev = e
	s.head.next = e
}
