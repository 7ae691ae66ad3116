// Package wire is the codec of Tether's protocol v1 (docs/protocol.md):
// length-prefixed frames that carry one MessagePack map each.
//
// Decoding works on byte slices in place (no reflection, no copies of the
// frame), because it runs on tetherd's event loop for every request.
package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// HeaderSize is the size of a frame's length prefix.
const HeaderSize = 4

// Version is the protocol version this package speaks.
const Version = 1

// Frame errors.
var (
	// ErrIncomplete means the buffer does not hold a whole frame yet.
	ErrIncomplete = errors.New("incomplete frame")
	// ErrFrameTooLarge means a frame declares a length over the limit.
	ErrFrameTooLarge = errors.New("frame too large")
	// ErrEmptyFrame means a frame declares a zero length.
	ErrEmptyFrame = errors.New("empty frame")
)

// NextFrame finds the first frame in buf. It returns the payload (a sub-slice of
// buf, valid until buf is reused) and the number of bytes the frame occupies.
// It checks the declared length against max before anything else, so a huge
// length is refused without reading or allocating. It returns ErrIncomplete
// when more bytes are needed; need then tells how many bytes the whole frame
// occupies once its header is known (0 before that).
func NextFrame(buf []byte, max int) (payload []byte, n int, need int, err error) {
	if len(buf) < HeaderSize {
		return nil, 0, 0, ErrIncomplete
	}
	size := binary.BigEndian.Uint32(buf)
	if size == 0 {
		return nil, 0, 0, ErrEmptyFrame
	}
	if uint64(size) > uint64(max) {
		return nil, 0, 0, fmt.Errorf("%w: %d bytes, limit %d", ErrFrameTooLarge, size, max)
	}
	total := HeaderSize + int(size)
	if len(buf) < total {
		return nil, 0, total, ErrIncomplete
	}
	return buf[HeaderSize:total], total, total, nil
}

// BeginFrame appends a placeholder length prefix to b and returns the new slice
// and the offset of the prefix, to be completed by EndFrame.
func BeginFrame(b []byte) ([]byte, int) {
	return append(b, 0, 0, 0, 0), len(b)
}

// EndFrame writes the length of the payload appended since BeginFrame.
func EndFrame(b []byte, start int) []byte {
	binary.BigEndian.PutUint32(b[start:], uint32(len(b)-start-HeaderSize))
	return b
}
