package mysql

import (
	"context"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	gomysql "github.com/go-mysql-org/go-mysql/mysql"

	"github.com/tether-php/tether/backend/sqlconn"
	"github.com/tether-php/tether/internal/evloop"
)

// Dialling a server connection: the handshake and authentication, then the
// session's setup for pooling, all blocking on a net.Conn; then its socket is
// handed to the event loop (conn.go).
//
// Why the handshake is written here: a pooled connection needs
// CLIENT_SESSION_TRACK (the server's own report of session state changes, the
// pool's guard against leaks) and CLIENT_DEPRECATE_EOF (so that the OK ending
// a result set carries that report), and the socket itself, afterwards.
// go-sql-driver/mysql exposes neither the capabilities nor the socket;
// go-mysql's client filters its capability flags and offers neither of the
// two. The packet flow is small and specified; the cryptography of every
// authentication method is go-mysql's (CalcPassword, CalcCachingSha2Password,
// CalcEd25519Password, EncryptPassword).

// capabilities are the client's capability flags.
const capabilities = gomysql.CLIENT_LONG_PASSWORD | gomysql.CLIENT_LONG_FLAG | gomysql.CLIENT_PROTOCOL_41 |
	gomysql.CLIENT_TRANSACTIONS | gomysql.CLIENT_SECURE_CONNECTION | gomysql.CLIENT_MULTI_RESULTS |
	gomysql.CLIENT_PS_MULTI_RESULTS | gomysql.CLIENT_PLUGIN_AUTH | gomysql.CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA |
	gomysql.CLIENT_SESSION_TRACK | gomysql.CLIENT_DEPRECATE_EOF | gomysql.CLIENT_CONNECT_ATTRS

// maxPacket is the largest packet the client announces it accepts.
const maxPacket = 1<<30 - 1

// blockingConn reads and writes packets on a net.Conn during the dial.
type blockingConn struct {
	nc  net.Conn
	seq byte
	buf []byte
}

func (b *blockingConn) readPacket() ([]byte, error) {
	var payload []byte
	for {
		var hdr [4]byte
		if _, err := io.ReadFull(b.nc, hdr[:]); err != nil {
			return nil, err
		}
		n := int(uint32(hdr[0]) | uint32(hdr[1])<<8 | uint32(hdr[2])<<16)
		b.seq = hdr[3] + 1
		start := len(payload)
		payload = append(payload, make([]byte, n)...)
		if _, err := io.ReadFull(b.nc, payload[start:]); err != nil {
			return nil, err
		}
		if n < maxPayload {
			return payload, nil
		}
	}
}

func (b *blockingConn) writePacket(payload []byte) error {
	b.buf = appendPackets(b.buf[:0], payload, b.seq)
	b.seq += byte(len(payload)/maxPayload + 1)
	_, err := b.nc.Write(b.buf)
	return err
}

// command starts a new command (sequence 0) and sends its packet.
func (b *blockingConn) command(payload []byte) error {
	b.seq = 0
	return b.writePacket(payload)
}

// handshake is what the server's initial handshake said.
type handshake struct {
	version  string
	threadID uint32
	caps     uint32
	scramble []byte
	plugin   string
}

// dial connects to the server, authenticates, sets the session up for pooling
// and reads its baseline settings. It returns the socket as a non-blocking fd
// of its own, for the loop.
func (d *driver) dial(ctx context.Context) (*conn, error) {
	nd := net.Dialer{Timeout: d.connectTimeout}
	nc, err := nd.DialContext(ctx, d.cfg.Net, d.cfg.Addr)
	if err != nil {
		return nil, err // a *net.OpError: "dial unix /path: connect: ..." names both already
	}
	ok := false
	defer func() {
		if !ok {
			nc.Close()
		}
	}()
	if dl, has := ctx.Deadline(); has {
		nc.SetDeadline(dl)
	} else {
		nc.SetDeadline(time.Now().Add(d.connectTimeout))
	}
	if tc, isTCP := nc.(*net.TCPConn); isTCP {
		tc.SetNoDelay(true)
	}
	bc := &blockingConn{nc: nc}
	hs, err := bc.readHandshake()
	if err != nil {
		return nil, fmt.Errorf("read handshake: %w", err)
	}
	if hs.caps&gomysql.CLIENT_SESSION_TRACK == 0 || hs.caps&gomysql.CLIENT_DEPRECATE_EOF == 0 {
		return nil, fmt.Errorf("server %s lacks session tracking (CLIENT_SESSION_TRACK, CLIENT_DEPRECATE_EOF): tetherd needs MySQL 5.7 or MariaDB 10.2 or later", hs.version)
	}
	var tc *tls.Conn
	if d.tls != nil {
		if tc, err = bc.startTLS(ctx, d, hs); err != nil {
			return nil, err
		}
	}
	secure := tc != nil || nc.RemoteAddr().Network() == "unix"
	if err := bc.authenticate(d, hs, tc != nil, secure); err != nil {
		return nil, err
	}
	c := &conn{drv: d, threadID: hs.threadID, version: hs.version}
	if err := c.setup(bc); err != nil {
		return nil, err
	}
	if tc != nil {
		if err := c.AdoptTLS(tc); err != nil {
			return nil, err
		}
		ok = true
		return c, nil
	}
	fd, err := evloop.TakeFd(nc)
	if err != nil {
		return nil, err
	}
	c.Adopt(fd)
	ok = true
	nc.Close() // the loop works on the duplicate
	return c, nil
}

// startTLS asks the server for TLS (an SSLRequest: the handshake response's
// first 32 bytes, with CLIENT_SSL) and runs the TLS handshake over the
// dialled connection, which b then reads and writes through. It returns nil
// with tls=preferred when the server offers no TLS.
func (b *blockingConn) startTLS(ctx context.Context, d *driver, hs *handshake) (*tls.Conn, error) {
	if hs.caps&gomysql.CLIENT_SSL == 0 {
		if d.tlsPreferred {
			return nil, nil
		}
		return nil, fmt.Errorf("server %s at %s does not offer TLS, which the dsn asks for (tls=%s)", hs.version, d.cfg.Addr, d.cfg.TLSConfig)
	}
	p := make([]byte, 0, 32)
	p = binary.LittleEndian.AppendUint32(p, clientCaps(d, hs, true))
	p = binary.LittleEndian.AppendUint32(p, maxPacket)
	p = append(p, d.collation)
	p = append(p, make([]byte, 23)...)
	if err := b.writePacket(p); err != nil {
		return nil, fmt.Errorf("send ssl request: %w", err)
	}
	tc := tls.Client(sqlconn.NewSocket(b.nc), d.tls)
	if err := tc.HandshakeContext(ctx); err != nil {
		return nil, fmt.Errorf("tls handshake with %s: %w", d.cfg.Addr, err)
	}
	b.nc = tc
	return tc, nil
}

// clientCaps are the capabilities the client asks for of a server that
// offers hs.caps.
func clientCaps(d *driver, hs *handshake, withTLS bool) uint32 {
	caps := capabilities & (hs.caps | gomysql.CLIENT_LONG_PASSWORD)
	if d.cfg.DBName != "" {
		caps |= gomysql.CLIENT_CONNECT_WITH_DB
	}
	if withTLS {
		caps |= gomysql.CLIENT_SSL
	}
	return caps
}

func (b *blockingConn) readHandshake() (*handshake, error) {
	p, err := b.readPacket()
	if err != nil {
		return nil, err
	}
	if len(p) > 0 && p[0] == 0xff {
		return nil, parseErr(p)
	}
	if len(p) < 1 || p[0] != 10 {
		return nil, fmt.Errorf("unsupported protocol version %d", p[0])
	}
	hs := &handshake{}
	pos := 1
	end := strings.IndexByte(string(p[pos:]), 0)
	if end < 0 {
		return nil, errors.New("malformed handshake")
	}
	hs.version = string(p[pos : pos+end])
	pos += end + 1
	if len(p) < pos+4+8+1+2 {
		return nil, errors.New("short handshake")
	}
	hs.threadID = binary.LittleEndian.Uint32(p[pos:])
	pos += 4
	hs.scramble = append(hs.scramble, p[pos:pos+8]...)
	pos += 8 + 1
	hs.caps = uint32(binary.LittleEndian.Uint16(p[pos:]))
	pos += 2
	if len(p) >= pos+1+2+2+1+10 {
		pos += 1 + 2 // charset, status
		hs.caps |= uint32(binary.LittleEndian.Uint16(p[pos:])) << 16
		pos += 2
		authLen := int(p[pos])
		pos += 1 + 10
		if hs.caps&gomysql.CLIENT_SECURE_CONNECTION != 0 {
			n := max(13, authLen-8)
			if len(p) < pos+n {
				return nil, errors.New("short handshake scramble")
			}
			// The last byte is a NUL terminator, not part of the scramble.
			hs.scramble = append(hs.scramble, p[pos:pos+n-1]...)
			pos += n
		}
		if hs.caps&gomysql.CLIENT_PLUGIN_AUTH != 0 && pos < len(p) {
			name := p[pos:]
			if i := strings.IndexByte(string(name), 0); i >= 0 {
				name = name[:i]
			}
			hs.plugin = string(name)
		}
	}
	if hs.caps&gomysql.CLIENT_PROTOCOL_41 == 0 {
		return nil, errors.New("server does not speak protocol 4.1")
	}
	return hs, nil
}

// authResponse computes the auth data for plugin.
func authResponse(d *driver, plugin string, scramble []byte) ([]byte, error) {
	pw := d.cfg.Passwd
	switch plugin {
	case "mysql_native_password", "":
		return gomysql.CalcPassword(scramble[:min(20, len(scramble))], []byte(pw)), nil
	case "caching_sha2_password":
		return gomysql.CalcCachingSha2Password(scramble, pw), nil
	case "client_ed25519":
		if pw == "" {
			return nil, nil
		}
		return gomysql.CalcEd25519Password(scramble, pw)
	case "mysql_clear_password":
		if !d.cfg.AllowCleartextPasswords {
			return nil, errors.New("the server asks for the cleartext password plugin; set allowCleartextPasswords=true in the dsn to allow it")
		}
		return append([]byte(pw), 0), nil
	}
	return nil, fmt.Errorf("authentication plugin %q is not supported", plugin)
}

// authenticate sends the handshake response and follows the server's auth
// exchange to its OK. withTLS: it goes over TLS (startTLS); secure: the
// channel is safe for a password in clear (TLS, or a Unix socket).
func (b *blockingConn) authenticate(d *driver, hs *handshake, withTLS, secure bool) error {
	plugin := hs.plugin
	if plugin == "" {
		plugin = "mysql_native_password"
	}
	auth, err := authResponse(d, plugin, hs.scramble)
	if err != nil {
		return err
	}
	caps := clientCaps(d, hs, withTLS)
	p := make([]byte, 0, 128)
	p = binary.LittleEndian.AppendUint32(p, caps)
	p = binary.LittleEndian.AppendUint32(p, maxPacket)
	p = append(p, d.collation)
	p = append(p, make([]byte, 23)...)
	p = append(p, d.cfg.User...)
	p = append(p, 0)
	p = gomysql.AppendLengthEncodedInteger(p, uint64(len(auth)))
	p = append(p, auth...)
	if caps&gomysql.CLIENT_CONNECT_WITH_DB != 0 {
		p = append(p, d.cfg.DBName...)
		p = append(p, 0)
	}
	p = append(p, plugin...)
	p = append(p, 0)
	if caps&gomysql.CLIENT_CONNECT_ATTRS != 0 {
		var attrs []byte
		for _, kv := range [][2]string{{"_client_name", "tetherd"}, {"program_name", "tetherd"}} {
			attrs = gomysql.AppendLengthEncodedInteger(attrs, uint64(len(kv[0])))
			attrs = append(attrs, kv[0]...)
			attrs = gomysql.AppendLengthEncodedInteger(attrs, uint64(len(kv[1])))
			attrs = append(attrs, kv[1]...)
		}
		p = gomysql.AppendLengthEncodedInteger(p, uint64(len(attrs)))
		p = append(p, attrs...)
	}
	if err := b.writePacket(p); err != nil {
		return fmt.Errorf("send handshake response: %w", err)
	}
	scramble := hs.scramble
	for range 8 { // bounded: an auth switch, then at most a few more-data rounds
		resp, err := b.readPacket()
		if err != nil {
			return fmt.Errorf("read auth result: %w", err)
		}
		if len(resp) == 0 {
			return errors.New("empty auth packet")
		}
		switch resp[0] {
		case 0x00:
			return nil
		case 0xff:
			return parseErr(resp)
		case 0xfe: // auth switch request
			if len(resp) == 1 {
				return errors.New("the server asks for the old (pre-4.1) password protocol, which is not supported")
			}
			rest := resp[1:]
			i := strings.IndexByte(string(rest), 0)
			if i < 0 {
				return errors.New("malformed auth switch request")
			}
			plugin = string(rest[:i])
			scramble = rest[i+1:]
			if n := len(scramble); n > 0 && scramble[n-1] == 0 {
				scramble = scramble[:n-1]
			}
			auth, err := authResponse(d, plugin, scramble)
			if err != nil {
				return err
			}
			if err := b.writePacket(auth); err != nil {
				return err
			}
		case 0x01: // auth more data
			if plugin != "caching_sha2_password" || len(resp) < 2 {
				return fmt.Errorf("unexpected auth data for plugin %s", plugin)
			}
			switch resp[1] {
			case 3: // fast auth success: the OK follows
			case 4: // full authentication
				if secure {
					if err := b.writePacket(append([]byte(d.cfg.Passwd), 0)); err != nil {
						return err
					}
					continue
				}
				if err := b.writePacket([]byte{2}); err != nil { // ask for the server's public key
					return err
				}
				keyPkt, err := b.readPacket()
				if err != nil {
					return err
				}
				if len(keyPkt) < 2 || keyPkt[0] != 0x01 {
					return errors.New("no public key from the server")
				}
				block, _ := pem.Decode(keyPkt[1:])
				if block == nil {
					return errors.New("malformed public key from the server")
				}
				pub, err := x509.ParsePKIXPublicKey(block.Bytes)
				if err != nil {
					return fmt.Errorf("parse server public key: %w", err)
				}
				rsaPub, ok := pub.(*rsa.PublicKey)
				if !ok {
					return errors.New("the server's public key is not RSA")
				}
				enc, err := gomysql.EncryptPassword(d.cfg.Passwd, scramble, rsaPub)
				if err != nil {
					return err
				}
				if err := b.writePacket(enc); err != nil {
					return err
				}
			default:
				return fmt.Errorf("unexpected caching_sha2_password state %d", resp[1])
			}
		default:
			return fmt.Errorf("unexpected auth packet 0x%02x", resp[0])
		}
	}
	return errors.New("authentication did not finish")
}

// queryBlocking runs a text-protocol statement during the dial and returns
// the rows of its result, if any (NULLs as nil). An OK gives no row.
func (b *blockingConn) queryBlocking(sql string) ([][][]byte, error) {
	if err := b.command(append([]byte{gomysql.COM_QUERY}, sql...)); err != nil {
		return nil, err
	}
	p, err := b.readPacket()
	if err != nil {
		return nil, err
	}
	switch p[0] {
	case 0x00:
		return nil, nil
	case 0xff:
		return nil, parseErr(p)
	}
	ncols, _, _ := gomysql.LengthEncodedInt(p)
	for i := uint64(0); i < ncols; i++ {
		if _, err := b.readPacket(); err != nil {
			return nil, err
		}
	}
	var rows [][][]byte
	for {
		p, err := b.readPacket()
		if err != nil {
			return nil, err
		}
		if p[0] == 0xff {
			return nil, parseErr(p)
		}
		if p[0] == 0xfe && len(p) < maxPayload {
			return rows, nil
		}
		var row [][]byte
		pos := 0
		for i := uint64(0); i < ncols; i++ {
			v, isNull, n, err := gomysql.LengthEncodedString(p[pos:])
			if err != nil {
				return nil, err
			}
			pos += n
			if isNull {
				row = append(row, nil)
			} else {
				row = append(row, append([]byte{}, v...))
			}
		}
		rows = append(rows, row)
	}
}
