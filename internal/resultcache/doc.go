// Package resultcache is tetherd's shared cache of encoded query results
// (issue 12): reads answered from memory, dropped when a write makes them
// stale, and identical reads in flight merged into one.
//
// What it holds is the reply to a query minus its head: the bytes that follow
// the reply map's header and its "id" field (see Cache.Begin and the server's
// side below), so that a hit costs a map lookup and one write with the new
// request id. Values are never modified once stored.
//
// A read's life, on the event-loop goroutine:
//
//  1. Begin with the read's key (backend, SQL text, typed parameters,
//     session-settings profile, reply form), the tables it reads and its TTL.
//     Begin answers Hit (the bytes: write them with the request's head, done),
//     Wait (an identical read is in flight and will serve this one: the
//     Waiter is called once with its outcome), or Lead (run it; a Ticket).
//  2. The leader runs the statement on the backend and encodes its reply.
//  3. Complete(ticket, body, err) serves every waiter (each writes the body
//     with its own request id) and stores the body if the read was
//     cacheable and no table it read was invalidated since Begin; Abandon
//     instead tells the waiters to run the read themselves (Begin again).
//
// A write's life, from any goroutine:
//
//  1. The backend acknowledges the write (the exec's OK, the COMMIT's OK, a
//     change-stream event): the data is changed in the database.
//  2. Invalidate(backend, tables written, cause), or InvalidateBackend when
//     the tables are not known. Every entry that read any of them is dropped,
//     and every read in flight that began before is neither stored nor joined.
//  3. Only then the write's reply goes out to its client.
//
// Step 2 must come after step 1 (a read that begins between an invalidation
// and the write's commit would see the old value and store it) and before
// step 3 (so that a client reads its own writes, and so does any client that
// learned of the write from it). Writes in a transaction invalidate at its
// commit (CauseTxCommit); reads in a transaction never use the cache.
//
// The invalidation race (a read that began before a write's invalidation and
// completes after it holds a value that may be older than the write) is
// closed by generations: one clock per Cache counts invalidations; each
// (backend, table) remembers the clock of its last invalidation, and each
// backend the clock of its last backend-wide one. A Ticket records the clock
// at Begin; Complete stores only if none of the read's tables (nor its
// backend) was invalidated since, and Begin joins a read in flight only under
// the same condition, so a waiter is never served a value read before a write
// that was acknowledged before the waiter began.
//
// Concurrency: every method is safe from any goroutine; one mutex guards the
// cache (uncontended, 15 ns of a hit's ~100; see bench_test.go), and
// Waiters are called with it released, so a Waiter may call back into the
// Cache. Counters are atomics, readable without the mutex (Stats).
//
// The server's side: it uses from package wire
//   - (*ResultEncoder).AppendBody(b []byte) []byte: the reply AppendReply
//     appends, without the head (e.head.open): "columns" and its array, then
//     "rows" and its array, or "count", "data" and its arrays (columnar);
//   - AppendCachedResult(b []byte, h Head, columnar bool, body []byte) []byte:
//     h.open(b, 2), or h.open(b, 3) when columnar, then body. It is what
//     AppendReply writes for the same result, for any head (an id, or a
//     batch element's Nested head), which is why the stored bytes exclude
//     the head and Key carries the reply form.
//
// Only a successful result within max_result_bytes is passed to Complete as
// a value; an error reply is passed as err (never stored).
package resultcache
