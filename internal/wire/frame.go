package wire

import (
	"encoding/binary"
	"fmt"
)

// SegmentName is the memfd name of every shared segment of the data plane;
// /proc/PID/maps shows each mapping as "/memfd:kiln-shm (deleted)".
const SegmentName = "kiln-shm"

// RingSegmentName is the memfd name of a data plane's ring segment (one per
// plane: the request and completion rings); /proc/PID/maps shows it as
// "/memfd:kiln-ring (deleted)".
const RingSegmentName = "kiln-ring"

// FrameHeaderBytes is the size of every frame's header: u32 size (the whole
// frame), u8 kind, u8 flags, u16 zero, u64 sequence number.
const FrameHeaderBytes = 16

// MaxRequestFrameBytes bounds a frame the host sends, so a plugin never buffers
// more for one request; a batch whose encoding is larger is refused before it is
// sent.
const MaxRequestFrameBytes = 1 << 20

// MaxMessageBytes bounds the error message of a completion; the plugin's SDK
// shortens longer ones.
const MaxMessageBytes = 16 << 10

// MaxTokenBytes bounds the hello frame's token.
const MaxTokenBytes = 64

// FrameKind says what a frame is.
type FrameKind uint8

// The frame kinds. Requests go from host to plugin; every request gets exactly one
// FrameDone with its sequence number.
const (
	FrameHello    FrameKind = 1  // token: the host proves it is the host that opened the plane
	FrameAttach   FrameKind = 2  // a staging segment (its memfd rides with the frame)
	FrameDetach   FrameKind = 3  // forget a staging segment
	FrameAlloc    FrameKind = 4  // AllocBuffer, optionally with the buffer's shared segment
	FrameFree     FrameKind = 5  // FreeBuffer
	FrameWrite    FrameKind = 6  // WriteBuffer from a staging range
	FrameRead     FrameKind = 7  // ReadBuffer into a staging range
	FrameSubmit   FrameKind = 8  // Submit
	FrameDispatch FrameKind = 9  // Backend.Dispatch with inputs and outputs in staging ranges
	FrameDone     FrameKind = 10 // the completion of a request
	FrameCopy     FrameKind = 11 // PeerCopy between two buffers of the plugin
)

// FlagFD marks a frame that carries a file descriptor (SCM_RIGHTS on the byte
// stream, in the order of the frames that carry one).
const FlagFD = 1

// FrameHeader is a decoded header.
type FrameHeader struct {
	Size  uint32
	Kind  FrameKind
	Flags uint8
	Seq   uint64
}

func PutHeader(b []byte, h FrameHeader) {
	binary.LittleEndian.PutUint32(b[0:], h.Size)
	b[4] = byte(h.Kind)
	b[5] = h.Flags
	b[6], b[7] = 0, 0
	binary.LittleEndian.PutUint64(b[8:], h.Seq)
}

// ParseHeader decodes a header and checks the size against limit.
func ParseHeader(b []byte, limit int) (FrameHeader, error) {
	if len(b) < FrameHeaderBytes {
		return FrameHeader{}, fmt.Errorf("frame header of %d bytes, want %d", len(b), FrameHeaderBytes)
	}
	h := FrameHeader{
		Size:  binary.LittleEndian.Uint32(b[0:]),
		Kind:  FrameKind(b[4]),
		Flags: b[5],
		Seq:   binary.LittleEndian.Uint64(b[8:]),
	}
	if b[6] != 0 || b[7] != 0 || h.Flags&^(FlagFD|FlagSpans) != 0 {
		return FrameHeader{}, fmt.Errorf("frame header has reserved bits set (flags %#x, %#x %#x)", h.Flags, b[6], b[7])
	}
	if h.Size < FrameHeaderBytes || int64(h.Size) > int64(limit) {
		return FrameHeader{}, fmt.Errorf("frame of %d bytes is outside [%d, %d]", h.Size, FrameHeaderBytes, limit)
	}
	return h, nil
}

// FlagSpans marks a completion that carries a spans trailer after its message.
const FlagSpans = 2
