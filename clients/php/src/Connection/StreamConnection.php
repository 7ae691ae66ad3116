<?php

declare(strict_types=1);

namespace Tether\Connection;

use Tether\Exception\LogicException;
use Tether\Exception\TetherException;
use Tether\Protocol\MalformedReply;
use Tether\Protocol\Reply;
use Tether\Protocol\Request;
use Tether\Server\ServerException;
use Tether\Sql\SqlText;

/**
 * StreamConnection is one socket to tetherd and the exchange of frames over it: write a request frame, read the
 * reply frame with the same id. Several requests may be pending at once (the protocol pipelines): submit() writes
 * one and returns its id, await() reads frames until that id's reply comes, keeping the replies of the other
 * pending requests it reads on the way for their own await(). call() is submit() then await(), and the reply
 * decoded (Protocol\Reply::decode()): the one path of every call answered by one reply.
 *
 * Lifecycle:
 *  1. The constructor only records the address; the first submit() opens the socket (a persistent one is reused
 *     from an earlier PHP request of the same worker when PHP finds it alive). On TCP a fresh socket first
 *     sends `hello` with the token.
 *  2. submit() writes the frame with one fwrite. If the socket is found dead before the request went out
 *     (write fails: EPIPE, reset; on TCP also EOF seen before writing), it is dropped, reopened once and the frame
 *     sent on the new socket, unless the request belongs to a transaction: that died with the old socket.
 *  3. await() reads until the reply is complete. Whatever goes wrong after the frame was written (EOF, timeout,
 *     bad frame, an id that no pending request has) throws UnknownOutcomeException and drops the socket: the
 *     request is never re-sent on its own, with one exception. On a Unix socket, a read that fails with a reset
 *     (ECONNRESET, which PHP's fread reports as false where EOF gives '') before any byte of the reply means
 *     that tetherd closed the socket with the request still unread in it: the request never ran. tetherd does
 *     that when it hands its clients to a new process (a binary upgrade), closing each connection the moment it
 *     is idle. call() then sends the request again once, on a new socket, unless it belongs to a transaction;
 *     await() throws RequestNotReadException (a CommunicationException: not executed). Every request still pending on a dropped socket fails the same way
 *     when awaited; one whose reply was read before the drop still gets it.
 *  4. At the end of the PHP request, endRequest() (a shutdown function) drops a socket that still owes a reply
 *     (a request that died mid-call, or a pending batch never waited for), else rolls back the transactions still
 *     open on it, so that the next PHP request of this worker inherits neither a pinned transaction nor a stale
 *     reply.
 *
 * PHP keys persistent sockets by address, so every Client of a process that talks to the same persistent address
 * shares one StreamConnection (see shared()), with one id sequence and one set of pending requests. Request ids
 * run from 1 to 2^32-1 and wrap; on a persistent socket reused from an earlier PHP request they continue above
 * anything that request could have used.
 *
 * @internal the wire layer; use Tether\Client
 */
class StreamConnection
{
    /** DEFAULT_MAX_FRAME_BYTES bounds reply frames unless the client sets max_frame_bytes. */
    public const DEFAULT_MAX_FRAME_BYTES = 64 << 20;

    private const MAX_ID = 0xFFFFFFFF;
    /** frames larger than this are read LARGE_READ_BYTES per recv instead of PHP's default 8 KiB */
    private const LARGE_READ_BYTES = 256 << 10;

    /** @var array<string, StreamConnection> persistent connections of this PHP request, by address */
    private static array $shared = [];

    /** @var resource|null */
    private $stream = null;
    private bool $tcp;
    private int $lastId = 0;
    /** epoch counts dropped sockets: a transaction is valid only in the epoch that began it */
    private int $epoch = 0;
    /** reading is true while await() reads frames: a call from a destructor then must not touch the socket */
    private bool $reading = false;
    /** @var array<int, array{float, int}> id => [I/O timeout, max frame bytes] of each request written on the
     *       current socket whose reply was not read yet */
    private array $pending = [];
    /** @var array<int, array{int, array<mixed>}> id => [epoch, reply map]: replies read while awaiting another */
    private array $stash = [];
    /** @var array<int, true> pending requests nobody will await: their replies are read and thrown away */
    private array $abandoned = [];
    /** the server's time for the last reply handed to a caller, in microseconds (its `us`); null without one */
    private ?int $lastServerMicros = null;
    /** the sum of the `us` of the replies handed to callers since the PHP request began */
    private int $serverMicrosTotal = 0;
    /** the I/O timeout set on the current stream, -1 when none is set yet */
    private float $appliedTimeout = -1.0;
    /** @var array<int, true> handles of the transactions open on the current socket */
    private array $openTx = [];
    /**
     * @var array<string, bool> backend ('' for tetherd's default) => whether its session sql_mode on this socket has
     *                          NO_BACKSLASH_ESCAPES, as read in the current epoch; emptied by any statement that may set
     *                          sql_mode, sent by any Client sharing the socket, and when the socket is dropped
     */
    private array $noBackslashEscapes = [];
    /**
     * @var array<string, string> backend ('' for tetherd's default) => the identity of its session settings on this
     *                            socket as tetherd last reported it (a reply's versions.profile), for the local cache
     *                            (Tether\Cache\LocalCache); emptied by every request sent, so that it is known only
     *                            while nothing sent since could have changed the settings
     */
    private array $profiles = [];
    /** resumed is true once this PHP request tried resumeProfiles() */
    private bool $resumed = false;
    /**
     * packer encodes request maps with php_only off: plain MessagePack (msgpack_pack's PHP-only markers for
     * references and objects are nothing tetherd reads), without msgpack_pack's per-array reference bookkeeping,
     * which costs more than the encoding itself (a batch of 20 queries: 2.7 us against 1.1 us).
     */
    private readonly \MessagePack $packer;

    /**
     * @param string $address "unix:///path/to/tether.sock", "tcp://host:port" or "tls://host:port"
     * @param string|null $token the shared secret sent in `hello` on a fresh TCP socket; ignored on Unix sockets
     * @param array<string, mixed>|null $tls PHP ssl context options, for a tls:// address
     */
    public function __construct(
        private readonly string $address,
        private readonly bool $persistent = true,
        private readonly ?string $token = null,
        private readonly ?array $tls = null,
        private readonly string $setting = 'the client\'s options',
    ) {
        $this->tcp = \strncmp($address, 'tcp://', 6) === 0 || \strncmp($address, 'tls://', 6) === 0;
        $this->packer = new \MessagePack(false);
    }

    /**
     * shared returns this PHP request's persistent connection to $address, creating it on first use, and registers
     * endRequest() as a shutdown function once.
     *
     * @throws LogicException when the address is already in use with another token
     */
    /**
     * @param array<string, mixed>|null $tls
     * @param string $setting what chose the address, named in a connect error
     */
    public static function shared(string $address, ?string $token = null, ?array $tls = null, string $setting = 'the client\'s options'): self
    {
        $connection = self::$shared[$address] ?? null;
        if ($connection === null) {
            if (self::$shared === []) {
                \register_shutdown_function([self::class, 'endRequest']);
            }

            return self::$shared[$address] = new self($address, true, $token, $tls, $setting);
        }
        if ($connection->token !== $token) {
            throw new LogicException(\sprintf('persistent connection to %s is already in use with another token', $address));
        }

        return $connection;
    }

    /**
     * endRequest releases every shared connection (see release()). Registered as a shutdown function by shared();
     * never throws.
     */
    public static function endRequest(): void
    {
        foreach (self::$shared as $connection) {
            $connection->release();
        }
    }

    /**
     * call is the one path of every call answered by one reply (every Client and Transaction method but
     * sendBatch()): it sends $request, waits for its reply and returns it decoded as Reply::decode() does for $as.
     * It is submit() then await() of the id, with one retry on a socket that tetherd closed with the request unread
     * (see the top).
     *
     * @param array<string, mixed> $request a map from Request, `id` first (its value is replaced)
     * @param string $as the kind of reply, as Reply::decode() names it
     * @param int|null $txEpoch the epoch() in which the request's transaction began; such a request is never sent
     *                          on a reopened socket
     * @param int $count for `sparseRows`: the number of keys asked for
     * @throws ServerException the reply is an error; the connection stays usable (except after id-0 frame errors)
     * @throws UnknownOutcomeException the request was written but no intact reply came back, or a malformed one
     *                                 ("tetherd sent a malformed reply to <the request's op>"); socket dropped
     * @throws CommunicationException the request was not sent (connect failed, socket dead twice, transaction lost)
     * @throws LogicException a reply is being read on this connection (a re-entrant call from a destructor)
     */
    public function call(array $request, string $as, float $ioTimeout, int $maxFrameBytes, ?int $txEpoch = null, int $count = 0): mixed
    {
        // receive() without await()'s checks: the reply to a request just written is pending, not read yet.
        try {
            $reply = $this->receive($this->send($request, $ioTimeout, $maxFrameBytes, $txEpoch));
        } catch (RequestNotReadException $e) {
            // Closed by tetherd with the request unread (see the top): it never ran, so one new socket may carry
            // it, unless it belonged to a transaction, which died with the old socket.
            if ($txEpoch !== null) {
                throw $this->lostTransaction($request);
            }
            $reply = $this->receive($this->send($request, $ioTimeout, $maxFrameBytes, null, false));
        }
        if (isset($reply['error'])) {
            throw ServerException::fromError((array) $reply['error']);
        }
        if ($as === 'first') {
            // The point read (queryOne, get), measured: Reply::first() without Reply::decode()'s call and match
            // saves about 450 of the 20,000 instructions of the PHP side of a call (callgrind, PHP 8.2, opcache).
            $row = Reply::first($reply);

            return $row !== false ? $row : throw $this->malformedReply($request['op']);
        }
        try {
            return Reply::decode($as, $reply, $count);
        } catch (MalformedReply) {
            throw $this->malformedReply($request['op']);
        }
    }

    /**
     * request sends one request map and returns the successful reply map as it is: call() with `reply`.
     *
     * @param array<string, mixed> $request a map from Request, `id` first (its value is replaced)
     * @param int|null $txEpoch as for call()
     * @return array<mixed>
     * @throws ServerException|UnknownOutcomeException|CommunicationException|LogicException as call()
     */
    public function request(array $request, float $ioTimeout, int $maxFrameBytes, ?int $txEpoch = null): array
    {
        return $this->call($request, 'reply', $ioTimeout, $maxFrameBytes, $txEpoch);
    }

    /**
     * submit writes one request map and returns its id, without reading anything; the request is pending until
     * await() reads its reply. Other requests may be pending on the socket, and others may be sent before this
     * one is awaited.
     *
     * The socket I/O timeout while awaiting the reply is $ioTimeout, raised to timeout_ms + 1 s when the request
     * carries a longer server-side deadline, so that tetherd's own `timeout` reply arrives before the socket gives
     * up.
     *
     * @param array<string, mixed> $request a map from Request, `id` first (its value is replaced)
     * @param int|null $txEpoch as for call()
     * @return int the request's id; epoch() right after the call is the epoch to await it in
     * @throws CommunicationException the request was not sent (connect failed, socket dead twice, transaction lost)
     * @throws LogicException a reply is being read on this connection (a re-entrant call from a destructor)
     */
    public function submit(array $request, float $ioTimeout, int $maxFrameBytes, ?int $txEpoch = null): int
    {
        return $this->send($request, $ioTimeout, $maxFrameBytes, $txEpoch);
    }

    /**
     * await returns the successful reply map of request $id, submitted in epoch $epoch: at once if it was read
     * already (while awaiting another request), else after reading frames until it comes, with the request's own
     * I/O timeout. Replies of other pending requests read meanwhile are kept for their await().
     *
     * @return array<mixed>
     * @throws ServerException the reply is an error; the connection stays usable (except after id-0 frame errors)
     * @throws UnknownOutcomeException the socket failed, timed out or got out of sync before the reply came, now or
     *                                 earlier (the socket of $epoch was dropped); the socket is dropped
     * @throws LogicException a reply is being read on this connection (a re-entrant call from a destructor)
     */
    public function await(int $id, int $epoch): array
    {
        if (isset($this->stash[$id]) && $this->stash[$id][0] === $epoch) {
            $reply = $this->stash[$id][1];
            unset($this->stash[$id]);
            $this->noteServerTime($reply);
        } else {
            if ($epoch !== $this->epoch || !isset($this->pending[$id])) {
                throw new UnknownOutcomeException(\sprintf(
                    'the connection to tetherd failed before the reply to request %d arrived; the request may or may not have been executed',
                    $id,
                ));
            }
            if ($this->reading) {
                throw new LogicException('a reply from tetherd is being read on this connection; another cannot be awaited now');
            }
            $reply = $this->receive($id);
        }
        if (isset($reply['error'])) {
            throw ServerException::fromError((array) $reply['error']);
        }

        return $reply;
    }

    /**
     * abandon says that nobody will await request $id of $epoch: its reply, read or still due, is thrown away.
     * A reply still due keeps the socket from being reused by the next PHP request (see release()).
     */
    public function abandon(int $id, int $epoch): void
    {
        if (isset($this->stash[$id]) && $this->stash[$id][0] === $epoch) {
            unset($this->stash[$id]);
        } elseif ($epoch === $this->epoch && isset($this->pending[$id])) {
            $this->abandoned[$id] = true;
        }
    }

    /**
     * lastServerMicros returns tetherd's time for the last call's reply, in microseconds (the reply's `us`: from
     * when tetherd read the request to its reply, backend included), or null when it carried none (ping, or an
     * error found in the request itself).
     */
    public function lastServerMicros(): ?int
    {
        return $this->lastServerMicros;
    }

    /**
     * serverMicrosTotal returns the sum of tetherd's times for the replies of this PHP request so far, in
     * microseconds: what a profiler shows as the page's data time spent in tetherd and the backends (the rest of
     * the calls' time is the way there and back).
     */
    public function serverMicrosTotal(): int
    {
        return $this->serverMicrosTotal;
    }

    /** @param array<mixed> $reply */
    private function noteServerTime(array $reply): void
    {
        $us = $reply['us'] ?? null;
        $this->lastServerMicros = \is_int($us) ? $us : null;
        if (\is_int($us)) {
            $this->serverMicrosTotal += $us;
        }
    }

    /** epoch returns the current socket generation; it changes whenever the socket is dropped. */
    public function epoch(): int
    {
        return $this->epoch;
    }

    /**
     * isReading tells whether a reply is being read right now, so that a destructor run by the garbage collector
     * in the middle of it must not send anything.
     */
    public function isReading(): bool
    {
        return $this->reading;
    }

    /** hasPending tells whether the socket owes replies: requests were written whose replies were not read yet. */
    public function hasPending(): bool
    {
        return $this->pending !== [];
    }

    /** track records a transaction opened by `begin` on the current socket, for release(). */
    public function track(int $tx): void
    {
        $this->openTx[$tx] = true;
    }

    /** untrack forgets a transaction that was committed or rolled back. */
    public function untrack(int $tx): void
    {
        unset($this->openTx[$tx]);
    }

    /**
     * knownNoBackslashEscapes answers whether the session sql_mode of $backend ('' for tetherd's default) on this
     * socket has NO_BACKSLASH_ESCAPES, as noted by noteNoBackslashEscapes() in the current epoch and not since
     * made unknown by a statement that may set sql_mode (any Client's on this socket); null when unknown.
     */
    public function knownNoBackslashEscapes(string $backend): ?bool
    {
        return $this->noBackslashEscapes[$backend] ?? null;
    }

    /**
     * noteNoBackslashEscapes records what the session sql_mode of $backend was read to say, on the socket of
     * $epoch; a note for an earlier epoch (the socket was dropped meanwhile, and tetherd forgot the session
     * settings with it) is ignored.
     */
    public function noteNoBackslashEscapes(string $backend, bool $on, int $epoch): void
    {
        if ($epoch === $this->epoch && $this->stream !== null) {
            $this->noBackslashEscapes[$backend] = $on;
        }
    }

    /**
     * knownProfile returns the identity of the session settings of $backend ('' for tetherd's default) on this socket,
     * as tetherd reported it since the last request was sent; null when unknown.
     */
    public function knownProfile(string $backend): ?string
    {
        return $this->profiles[$backend] ?? null;
    }

    /**
     * resumeProfiles restores, once per PHP request and only before the socket is opened in it, the settings
     * identities (knownProfile()) that the previous PHP request of this worker knew at its end on this persistent
     * socket, if nothing crossed the socket since: its byte position (ftell) is where that request left it. It opens
     * the socket, as the next call would, to read that position. So a page whose reads are all local-cache hits needs
     * no call to learn the settings again. Returns whether anything was restored.
     */
    public function resumeProfiles(float $ioTimeout, int $maxFrameBytes): bool
    {
        if ($this->resumed || $this->stream !== null || !$this->persistent || !\function_exists('apcu_fetch')) {
            return false;
        }
        $this->resumed = true;
        $saved = \apcu_fetch($this->sessionKey());
        if (!\is_array($saved) || !\is_int($saved[0] ?? null) || !\is_array($saved[1] ?? null)) {
            return false;
        }
        try {
            $this->open($ioTimeout, $maxFrameBytes);
        } catch (TetherException) {
            return false;
        }
        if ($this->stream === null || \ftell($this->stream) !== $saved[0]) {
            return false;
        }
        $this->profiles = $saved[1];

        return true;
    }

    /** sessionKey is the APCu key of this worker's settings identities on this socket (resumeProfiles()). */
    private function sessionKey(): string
    {
        return 'tether:session:' . \getmypid() . ':' . $this->address;
    }

    /**
     * noteProfile records the settings identity a reply reported for $backend, if that reply came on the socket of
     * $epoch and no other request is pending on it (one sent meanwhile could have changed the settings).
     */
    public function noteProfile(string $backend, string $profile, int $epoch): void
    {
        if ($epoch === $this->epoch && $this->stream !== null && $this->pending === []) {
            $this->profiles[$backend] = $profile;
        }
    }

    /** holds tells whether transaction $tx, begun in $epoch, is still open on the current socket. */
    public function holds(int $tx, int $epoch): bool
    {
        return $epoch === $this->epoch && isset($this->openTx[$tx]);
    }

    /**
     * release readies the connection for the next PHP request of this worker: it drops the socket if a reply is
     * still due (the PHP request died mid-call, or a pending batch was never waited for; tetherd cancels what a
     * closed connection still runs), else rolls back each transaction still open on it, dropping the socket if a
     * rollback fails (tetherd rolls back the transactions of a closed connection). Never throws.
     */
    public function release(): void
    {
        $this->serverMicrosTotal = 0;
        $this->lastServerMicros = null;
        if ($this->pending !== [] || $this->reading) {
            $this->drop();

            return;
        }
        if ($this->profiles !== [] && $this->openTx === [] && $this->persistent && $this->stream !== null && \function_exists('apcu_store')
            && \apcu_enabled() && ($position = \ftell($this->stream)) !== false) {
            // For the next PHP request of this worker on this socket: see resumeProfiles().
            \apcu_store($this->sessionKey(), [$position, $this->profiles], 3600);
        }
        $timeout = $this->appliedTimeout > 0 ? $this->appliedTimeout : 5.0;
        foreach ($this->openTx as $tx => $_) {
            unset($this->openTx[$tx]);
            try {
                $this->request(Request::rollback($tx), $timeout, self::DEFAULT_MAX_FRAME_BYTES, $this->epoch);
            } catch (ServerException) {
                // tx_aborted, unknown_tx: it is gone already
            } catch (\Throwable) {
                $this->drop();

                return;
            }
        }
    }

    /** close drops the socket, persistent or not; tetherd rolls back its open transactions. The next request reopens. */
    public function close(): void
    {
        $this->drop();
    }

    /**
     * malformedReply reports a well-framed reply map that lacks what its op promises; the socket is dropped since
     * the server is not speaking the protocol this client knows.
     *
     * @param string $op the request's op
     */
    public function malformedReply(string $op): UnknownOutcomeException
    {
        $this->drop();

        return new UnknownOutcomeException(\sprintf(
            'tetherd sent a malformed reply to %s; the request may or may not have been executed',
            $op,
        ));
    }

    /**
     * connect opens the socket with the given connect timeout. Overridden in tests to inject broken sockets.
     *
     * @return resource
     * @throws CommunicationException
     */
    protected function connect(float $timeout)
    {
        $flags = $this->persistent ? \STREAM_CLIENT_CONNECT | \STREAM_CLIENT_PERSISTENT : \STREAM_CLIENT_CONNECT;
        $stream = $this->tls === null
            ? @\stream_socket_client($this->address, $errno, $error, $timeout, $flags)
            : @\stream_socket_client($this->address, $errno, $error, $timeout, $flags, \stream_context_create(['ssl' => $this->tls]));
        if ($stream === false) {
            throw CommunicationException::connectFailed($this->address, (int) $errno, (string) $error, $this->setting);
        }

        return $stream;
    }

    /** open connects and prepares a socket: timeout, request ids, and `hello` on a fresh TCP socket. */
    private function open(float $ioTimeout, int $maxFrameBytes): void
    {
        $stream = $this->connect($ioTimeout);
        $this->stream = $stream;
        $this->applyTimeout($ioTimeout);
        // The position counts bytes moved over this socket since it was opened, in any PHP request of this worker.
        // A reused persistent socket may still carry a reply to a request abandoned by a dead PHP request: ids
        // from here on stay clear of all ids sent earlier (each used at least 6 bytes), so such a reply is
        // detected as out of sync instead of being taken for ours.
        $position = \ftell($stream);
        if ($position > 0) {
            $this->lastId = $position % self::MAX_ID;

            return;
        }
        // A fresh socket: settings identities saved for an earlier one of this worker (resumeProfiles()) are not its
        // session's, even should its position come to match theirs.
        if ($this->persistent && \function_exists('apcu_delete')) {
            \apcu_delete($this->sessionKey());
        }
        if ($this->tcp && $this->token !== null) {
            $this->hello($maxFrameBytes);
        }
    }

    /** hello authenticates a fresh TCP socket; on failure the socket is dropped and the request is not sent. */
    private function hello(int $maxFrameBytes): void
    {
        $request = Request::hello((string) $this->token);
        // Never reopened: the socket is fresh already, and a new one would say hello again.
        $id = $this->send($request, $this->appliedTimeout, $maxFrameBytes, null, false);
        try {
            $this->await($id, $this->epoch);
        } catch (ServerException $e) {
            // tetherd closes the connection after `unauthorized`
            $this->drop();
            throw $e;
        } catch (UnknownOutcomeException $e) {
            // Only hello was in doubt; the caller's request was not sent.
            throw new CommunicationException(\sprintf('hello to tetherd at %s failed; the request was not sent', $this->address), 0, $e);
        }
    }

    /**
     * send gives $request the next id and writes it as one frame (length prefix and payload, one fwrite), opening
     * the socket first if needed, and marks its reply as due; it returns the id. By reference, so that setting the
     * id writes into the caller's map instead of a copy of it. If the socket is found dead before the request went
     * out, it is dropped and, when $reopen and the request belongs to no transaction, reopened once.
     *
     * @param array<string, mixed> $request
     * @throws CommunicationException|LogicException as submit()
     */
    private function send(array &$request, float $ioTimeout, int $maxFrameBytes, ?int $txEpoch, bool $reopen = true): int
    {
        if ($this->reading) {
            throw new LogicException('a reply from tetherd is being read on this connection; a request cannot be sent now');
        }
        if ($txEpoch !== null && $txEpoch !== $this->epoch) {
            throw $this->lostTransaction($request);
        }
        if (isset($request['timeout_ms']) && $request['timeout_ms'] / 1000 + 1.0 > $ioTimeout) {
            $ioTimeout = $request['timeout_ms'] / 1000 + 1.0;
        }
        if ($this->stream === null) {
            $this->open($ioTimeout, $maxFrameBytes);
        } elseif ($ioTimeout !== $this->appliedTimeout) {
            $this->applyTimeout($ioTimeout);
        }
        if ($this->noBackslashEscapes !== [] && self::maySetSqlMode($request)) {
            $this->noBackslashEscapes = [];
        }
        $this->profiles = [];
        $reopened = false;
        while (true) {
            $id = $request['id'] = $this->lastId = $this->lastId === self::MAX_ID ? 1 : $this->lastId + 1;
            $payload = $this->packer->pack($request);
            $frame = \pack('N', \strlen($payload)) . $payload;
            // Due before the write: if the PHP request dies inside fwrite, release() must still drop the socket.
            $this->pending[$id] = [$ioTimeout, $maxFrameBytes];
            $stream = $this->stream;
            // Not a resource: closed behind our back, e.g. by another stream_socket_client() on the same persistent
            // address. On TCP a write to a socket the peer closed still succeeds and the request is lost, so look
            // for EOF first; on a Unix socket the write itself fails with EPIPE.
            if (\is_resource($stream) && !($this->tcp && \feof($stream)) && @\fwrite($stream, $frame) === \strlen($frame)) {
                return $id;
            }
            // Dead before the request went out: nothing ran, so one more socket may carry it. The requests pending
            // on the dead socket are lost with it (their await() throws UnknownOutcomeException).
            $this->drop();
            if ($txEpoch !== null) {
                throw $this->lostTransaction($request);
            }
            if ($reopened) {
                throw new CommunicationException(\sprintf('write to tetherd at %s failed on a fresh socket too; the request was not sent', $this->address));
            }
            if (!$reopen) {
                throw new CommunicationException(\sprintf('send %s to tetherd at %s failed; the request was not sent', $request['op'], $this->address));
            }
            $this->open($ioTimeout, $maxFrameBytes);
            $reopened = true;
        }
    }

    /**
     * receive reads frames until the reply to pending request $id comes and returns it (an error reply included).
     * A frame for another pending request is kept in the stash (or thrown away if abandoned); any other frame
     * means the stream is out of sync.
     *
     * @return array<mixed>
     * @throws UnknownOutcomeException|ServerException (an id-0 frame error) after dropping the socket
     */
    private function receive(int $id): array
    {
        [$ioTimeout, $maxFrameBytes] = $this->pending[$id];
        if ($ioTimeout !== $this->appliedTimeout) {
            $this->applyTimeout($ioTimeout);
        }
        if (\count($this->pending) > 1) {
            // the frame may be another request's, which may accept more
            foreach ($this->pending as [, $max]) {
                $maxFrameBytes = \max($maxFrameBytes, $max);
            }
        }
        $stream = $this->stream;
        $this->reading = true;
        try {
            while (true) {
                // Usually one poll and one recv: this fread fills PHP's stream buffer (8 KiB) with the whole reply,
                // and the payload is then copied out of that buffer without a syscall.
                // Silenced: a TLS stream reports a failed read as a warning too (the exception below says it).
                $head = @\fread($stream, 4);
                if ($head === false && $id === $this->lastId && !$this->tcp
                    && !(\stream_get_meta_data($stream)['timed_out'] ?? false)) {
                    // A reset before any byte of a frame: tetherd closed the socket with unread bytes in it. Only
                    // the last request written is then sure to be among them (an earlier one may have run).
                    $this->drop();
                    throw new RequestNotReadException(\sprintf(
                        'tetherd at %s closed the connection without reading request %d (it hands its clients over to a new process); the request was not executed',
                        $this->address,
                        $id,
                    ));
                }
                if ($head === false || \strlen($head) !== 4) {
                    $head = (string) $head . @\stream_get_contents($stream, 4 - \strlen((string) $head));
                    if (\strlen($head) !== 4) {
                        throw $this->readFailure();
                    }
                }
                $length = \unpack('N', $head)[1];
                if ($length === 0 || $length > $maxFrameBytes) {
                    $this->drop();
                    throw new UnknownOutcomeException(\sprintf(
                        'tetherd sent a reply frame of %d bytes (must be 1..%d); the request may or may not have been executed',
                        $length,
                        $maxFrameBytes,
                    ));
                }
                // stream_get_contents loops in C into one string allocated once, until $length bytes or EOF or
                // timeout; for a large frame PHP's read size is raised from 8 KiB so that a few large recvs fetch it.
                if ($length > self::LARGE_READ_BYTES) {
                    $previous = \stream_set_chunk_size($stream, self::LARGE_READ_BYTES);
                    $payload = @\stream_get_contents($stream, $length);
                    \stream_set_chunk_size($stream, $previous);
                } else {
                    $payload = @\stream_get_contents($stream, $length);
                }
                if ($payload === false || \strlen($payload) !== $length) {
                    throw $this->readFailure();
                }
                $reply = @\msgpack_unpack($payload);
                if (!\is_array($reply)) {
                    $this->drop();
                    throw new UnknownOutcomeException('tetherd sent a reply that is not a MessagePack map; the request may or may not have been executed');
                }
                $replyId = $reply['id'] ?? null;
                if ($replyId === $id) {
                    unset($this->pending[$id]);
                    $this->noteServerTime($reply);

                    return $reply;
                }
                if (!\is_int($replyId) || !isset($this->pending[$replyId])) {
                    break;
                }
                unset($this->pending[$replyId]);
                if (isset($this->abandoned[$replyId])) {
                    unset($this->abandoned[$replyId]);
                } else {
                    $this->stash[$replyId] = [$this->epoch, $reply];
                }
            }
        } finally {
            $this->reading = false;
        }
        $this->drop();
        if ($replyId === 0 && isset($reply['error'])) {
            // A frame-level error (bad_frame, too_large): tetherd rejected a frame and closes the connection.
            throw ServerException::fromError((array) $reply['error']);
        }
        throw new UnknownOutcomeException(\sprintf(
            'tetherd sent the reply to request %s while request %d was waiting: the stream is out of sync; the request may or may not have been executed',
            \is_scalar($replyId) ? (string) $replyId : \get_debug_type($replyId),
            $id,
        ));
    }

    /** readFailure drops the socket after a read that ended early (EOF or timeout) and returns what to throw. */
    private function readFailure(): UnknownOutcomeException
    {
        $timedOut = (bool) (\stream_get_meta_data($this->stream)['timed_out'] ?? false);
        $timeout = $this->appliedTimeout;
        $this->drop();

        return new UnknownOutcomeException($timedOut
            ? \sprintf('no reply from tetherd within %.3F s; the request may or may not have been executed', $timeout)
            : 'tetherd closed the connection before replying; the request may or may not have been executed');
    }

    private function applyTimeout(float $seconds): void
    {
        $whole = (int) $seconds;
        \stream_set_timeout($this->stream, $whole, (int) (($seconds - $whole) * 1e6));
        $this->appliedTimeout = $seconds;
    }

    /**
     * drop closes the socket and forgets everything tied to it: its transactions and the requests pending on it
     * (their await() now throws UnknownOutcomeException). Replies already read stay in the stash.
     */
    private function drop(): void
    {
        if ($this->stream !== null && \is_resource($this->stream)) {
            \fclose($this->stream);
        }
        $this->stream = null;
        $this->epoch++;
        $this->openTx = [];
        $this->noBackslashEscapes = [];
        $this->profiles = [];
        $this->pending = [];
        $this->abandoned = [];
        $this->reading = false;
        $this->appliedTimeout = -1.0;
    }

    /**
     * maySetSqlMode tells whether $request (a batch: any of its operations) holds a statement that may set the
     * session's sql_mode, read either way a backslash can be (with or without NO_BACKSLASH_ESCAPES).
     *
     * @param array<string, mixed> $request
     */
    private static function maySetSqlMode(array $request): bool
    {
        foreach (isset($request['ops']) && \is_array($request['ops']) ? $request['ops'] : [$request] as $op) {
            $sql = \is_array($op) ? ($op['sql'] ?? null) : null;
            if (\is_string($sql) && (SqlText::setsSqlMode($sql, false) || SqlText::setsSqlMode($sql, true))) {
                return true;
            }
        }

        return false;
    }

    /** @param array<string, mixed> $request */
    private function lostTransaction(array $request): CommunicationException
    {
        return new CommunicationException(\sprintf(
            'transaction %d was lost with its connection to tetherd, which rolled it back; the %s was not sent',
            $request['tx'] ?? 0,
            $request['op'] ?? 'request',
        ));
    }
}
