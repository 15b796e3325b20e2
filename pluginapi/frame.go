package pluginapi

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
)

// The fast path's frames: fixed little-endian binary records in the data plane's
// rings (the hello frame alone on its unix socket). pluginapi/doc.go and
// docs/design.md ("Fast path: frames") give the format; the encoders and
// decoders here are its only implementation, and the decoders of both sides are
// fuzzed.

// SegmentName is the memfd name of every shared segment of the data plane;
// /proc/PID/maps shows each mapping as "/memfd:kiln-shm (deleted)".
const SegmentName = "kiln-shm"

// RingSegmentName is the memfd name of a data plane's ring segment (one per
// plane: the request and completion rings); /proc/PID/maps shows it as
// "/memfd:kiln-ring (deleted)".
const RingSegmentName = "kiln-ring"

// frameHeaderBytes is the size of every frame's header: u32 size (the whole
// frame), u8 kind, u8 flags, u16 zero, u64 sequence number.
const frameHeaderBytes = 16

// maxRequestFrameBytes bounds a frame the host sends, so a plugin never buffers
// more for one request; a batch whose encoding is larger is refused before it is
// sent.
const maxRequestFrameBytes = 1 << 20

// maxMessageBytes bounds the error message of a completion; the plugin's SDK
// shortens longer ones.
const maxMessageBytes = 16 << 10

// maxTokenBytes bounds the hello frame's token.
const maxTokenBytes = 64

// frameKind says what a frame is.
type frameKind uint8

// The frame kinds. Requests go from host to plugin; every request gets exactly one
// frameDone with its sequence number.
const (
	frameHello    frameKind = 1  // token: the host proves it is the host that opened the plane
	frameAttach   frameKind = 2  // a staging segment (its memfd rides with the frame)
	frameDetach   frameKind = 3  // forget a staging segment
	frameAlloc    frameKind = 4  // AllocBuffer, optionally with the buffer's shared segment
	frameFree     frameKind = 5  // FreeBuffer
	frameWrite    frameKind = 6  // WriteBuffer from a staging range
	frameRead     frameKind = 7  // ReadBuffer into a staging range
	frameSubmit   frameKind = 8  // Submit
	frameDispatch frameKind = 9  // Backend.Dispatch with inputs and outputs in staging ranges
	frameDone     frameKind = 10 // the completion of a request
	frameCopy     frameKind = 11 // PeerCopy between two buffers of the plugin
)

// flagFD marks a frame that carries a file descriptor (SCM_RIGHTS on the byte
// stream, in the order of the frames that carry one).
const flagFD = 1

// frameHeader is a decoded header.
type frameHeader struct {
	size  uint32
	kind  frameKind
	flags uint8
	seq   uint64
}

func putHeader(b []byte, h frameHeader) {
	binary.LittleEndian.PutUint32(b[0:], h.size)
	b[4] = byte(h.kind)
	b[5] = h.flags
	b[6], b[7] = 0, 0
	binary.LittleEndian.PutUint64(b[8:], h.seq)
}

// parseHeader decodes a header and checks the size against limit.
func parseHeader(b []byte, limit int) (frameHeader, error) {
	if len(b) < frameHeaderBytes {
		return frameHeader{}, fmt.Errorf("frame header of %d bytes, want %d", len(b), frameHeaderBytes)
	}
	h := frameHeader{
		size:  binary.LittleEndian.Uint32(b[0:]),
		kind:  frameKind(b[4]),
		flags: b[5],
		seq:   binary.LittleEndian.Uint64(b[8:]),
	}
	if b[6] != 0 || b[7] != 0 || h.flags&^(flagFD|flagSpans) != 0 {
		return frameHeader{}, fmt.Errorf("frame header has reserved bits set (flags %#x, %#x %#x)", h.flags, b[6], b[7])
	}
	if h.size < frameHeaderBytes || int64(h.size) > int64(limit) {
		return frameHeader{}, fmt.Errorf("frame of %d bytes is outside [%d, %d]", h.size, frameHeaderBytes, limit)
	}
	return h, nil
}

// enc appends little-endian fields.
type enc struct{ b []byte }

func (e *enc) u8(v uint8)   { e.b = append(e.b, v) }
func (e *enc) u32(v uint32) { e.b = binary.LittleEndian.AppendUint32(e.b, v) }
func (e *enc) u64(v uint64) { e.b = binary.LittleEndian.AppendUint64(e.b, v) }
func (e *enc) bytes(v []byte) {
	e.b = append(e.b, v...)
	for len(e.b)%8 != 0 {
		e.b = append(e.b, 0)
	}
}
func (e *enc) rng(r BufferRange) { e.u64(r.Buffer); e.u64(r.Offset); e.u64(r.Size) }

// dec reads little-endian fields; the first short read sets err and every later
// read returns zero.
type dec struct {
	b   []byte
	err error
}

var errShort = errors.New("frame body ends early")

func (d *dec) take(n int) []byte {
	if d.err != nil || n < 0 || len(d.b) < n {
		if d.err == nil {
			d.err = errShort
		}
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}
func (d *dec) u8() uint8 {
	if v := d.take(1); v != nil {
		return v[0]
	}
	return 0
}
func (d *dec) u32() uint32 {
	if v := d.take(4); v != nil {
		return binary.LittleEndian.Uint32(v)
	}
	return 0
}
func (d *dec) u64() uint64 {
	if v := d.take(8); v != nil {
		return binary.LittleEndian.Uint64(v)
	}
	return 0
}

// bytes reads n bytes and the zero padding to the next multiple of 8.
func (d *dec) bytes(n uint32) []byte {
	v := d.take(int(n))
	d.zeros(int((8 - n%8) % 8))
	return v
}

// zeros reads n reserved bytes, which must be zero.
func (d *dec) zeros(n int) {
	for _, b := range d.take(n) {
		if b != 0 && d.err == nil {
			d.err = errors.New("reserved bytes are not zero")
		}
	}
}

// pad reads a reserved u32.
func (d *dec) pad()             { d.zeros(4) }
func (d *dec) rng() BufferRange { return BufferRange{Buffer: d.u64(), Offset: d.u64(), Size: d.u64()} }

// end fails when bytes are left over or a read ran short.
func (d *dec) end() error {
	if d.err != nil {
		return d.err
	}
	if len(d.b) != 0 {
		return fmt.Errorf("frame body has %d bytes left over", len(d.b))
	}
	return nil
}

// segRange is a range of a shared segment: where request bytes are staged.
type segRange struct {
	segment      uint32
	offset, size uint64
}

func (e *enc) seg(r segRange) { e.u32(r.segment); e.u32(0); e.u64(r.offset); e.u64(r.size) }
func (d *dec) seg() segRange {
	r := segRange{segment: d.u32()}
	d.pad()
	r.offset, r.size = d.u64(), d.u64()
	return r
}

// request is a decoded request frame (the plugin's side).
type request struct {
	kind frameKind
	seq  uint64
	fd   bool

	token []byte // hello

	segment uint32 // attach, detach, alloc (0: none)
	size    uint64 // attach, alloc

	adapter uint32 // alloc, submit
	usage   BufferUsage

	buffer uint64   // free, write, read
	offset uint64   // write, read
	data   segRange // write, read: the staged bytes

	commands []SubmitCommand // submit

	src, dst BufferRange // copy

	dispatch *DispatchRequest // dispatch
	inputs   []segRange       // dispatch: by binding; size 0 with segment 0 is no input
	outputs  []segRange       // dispatch: where each output goes
}

// Command opcodes inside a submit frame.
const (
	opDispatch = 1
	opCopy     = 2
	opFill     = 3
)

// maxBindings bounds a dispatch's bindings on the wire (the IR allows 32 buffers).
const maxBindings = 64

// encodeRequest encodes r as one frame.
func encodeRequest(r *request) ([]byte, error) {
	e := &enc{b: make([]byte, frameHeaderBytes, 256)}
	switch r.kind {
	case frameHello:
		e.u32(uint32(len(r.token)))
		e.u32(0)
		e.bytes(r.token)
	case frameAttach:
		e.u32(r.segment)
		e.u32(0)
		e.u64(r.size)
	case frameDetach:
		e.u32(r.segment)
		e.u32(0)
	case frameAlloc:
		e.u32(r.adapter)
		e.u32(uint32(r.usage))
		e.u64(r.size)
		e.u32(r.segment)
		e.u32(0)
	case frameFree:
		e.u64(r.buffer)
	case frameWrite, frameRead:
		e.u64(r.buffer)
		e.u64(r.offset)
		e.seg(r.data)
	case frameCopy:
		e.rng(r.src)
		e.rng(r.dst)
	case frameSubmit:
		e.u32(r.adapter)
		e.u32(uint32(len(r.commands)))
		for i, c := range r.commands {
			if err := encodeCommand(e, c); err != nil {
				return nil, fmt.Errorf("command %d: %w", i, err)
			}
			if len(e.b) > maxRequestFrameBytes {
				break
			}
		}
	case frameDispatch:
		d := r.dispatch
		e.u64(d.Pipeline)
		e.u32(d.Grid[0])
		e.u32(d.Grid[1])
		e.u32(d.Grid[2])
		e.u32(uint32(len(r.inputs)))
		for i, in := range r.inputs {
			var count uint32
			if i < len(d.OutputCounts) {
				count = d.OutputCounts[i]
			}
			var has uint32
			if i < len(d.Inputs) && d.Inputs[i] != nil {
				has = 1
			}
			e.u32(has)
			e.u32(count)
			e.seg(in)
		}
		e.u32(uint32(len(r.outputs)))
		e.u32(uint32(len(d.Uniforms)))
		for _, out := range r.outputs {
			e.seg(out)
		}
		e.bytes(d.Uniforms)
	default:
		return nil, fmt.Errorf("no request frame of kind %d", r.kind)
	}
	if len(e.b) > maxRequestFrameBytes {
		return nil, fmt.Errorf("the request encodes to %d bytes, more than a frame's %d", len(e.b), maxRequestFrameBytes)
	}
	var flags uint8
	if r.fd {
		flags = flagFD
	}
	putHeader(e.b, frameHeader{size: uint32(len(e.b)), kind: r.kind, flags: flags, seq: r.seq})
	return e.b, nil
}

func encodeCommand(e *enc, c SubmitCommand) error {
	start := len(e.b)
	switch c := c.(type) {
	case DispatchCommand:
		if len(c.Bindings) > maxBindings {
			return fmt.Errorf("%d bindings, more than %d", len(c.Bindings), maxBindings)
		}
		if len(c.Uniforms) > maxRequestFrameBytes {
			return fmt.Errorf("%d uniform bytes, more than a frame's %d", len(c.Uniforms), maxRequestFrameBytes)
		}
		e.u8(opDispatch)
		e.b = append(e.b, 0, 0, 0, 0, 0, 0, 0) // pad + length, set below
		e.u64(c.Pipeline)
		e.u32(c.Grid[0])
		e.u32(c.Grid[1])
		e.u32(c.Grid[2])
		e.u32(uint32(len(c.Bindings)))
		e.u32(uint32(len(c.Uniforms)))
		e.u32(0)
		for _, b := range c.Bindings {
			e.rng(b)
		}
		e.bytes(c.Uniforms)
	case CopyCommand:
		e.u8(opCopy)
		e.b = append(e.b, 0, 0, 0, 0, 0, 0, 0)
		e.rng(c.Src)
		e.rng(c.Dst)
	case FillCommand:
		e.u8(opFill)
		e.b = append(e.b, 0, 0, 0, 0, 0, 0, 0)
		e.rng(c.Dst)
		e.u32(c.Value)
		e.u32(0)
	default:
		return fmt.Errorf("unknown command %T", c)
	}
	binary.LittleEndian.PutUint32(e.b[start+4:], uint32(len(e.b)-start))
	return nil
}

// decodeRequest decodes a request frame the plugin received. It checks the
// frame's structure only (counts against the bytes present, reserved fields);
// ranges are checked against the tables by the caller.
func decodeRequest(b []byte) (*request, error) {
	h, err := parseHeader(b, maxRequestFrameBytes)
	if err != nil {
		return nil, err
	}
	if int(h.size) != len(b) || h.flags&flagSpans != 0 {
		return nil, fmt.Errorf("frame says %d bytes but %d were given (flags %#x)", h.size, len(b), h.flags)
	}
	r := &request{kind: h.kind, seq: h.seq, fd: h.flags&flagFD != 0}
	d := &dec{b: b[frameHeaderBytes:]}
	wantFD := false
	switch h.kind {
	case frameHello:
		n := d.u32()
		d.pad()
		if n > maxTokenBytes {
			return nil, fmt.Errorf("hello token of %d bytes, more than %d", n, maxTokenBytes)
		}
		r.token = d.bytes(n)
		wantFD = true // the ring segment
	case frameAttach:
		r.segment = d.u32()
		d.pad()
		r.size = d.u64()
		wantFD = true
		if r.segment == 0 || r.size == 0 {
			return nil, fmt.Errorf("attach of segment %d with %d bytes", r.segment, r.size)
		}
	case frameDetach:
		r.segment = d.u32()
		d.pad()
	case frameAlloc:
		r.adapter = d.u32()
		r.usage = BufferUsage(d.u32())
		r.size = d.u64()
		r.segment = d.u32()
		d.pad()
		wantFD = r.segment != 0
	case frameFree:
		r.buffer = d.u64()
	case frameWrite, frameRead:
		r.buffer = d.u64()
		r.offset = d.u64()
		r.data = d.seg()
	case frameCopy:
		r.src, r.dst = d.rng(), d.rng()
	case frameSubmit:
		r.adapter = d.u32()
		n := d.u32()
		if uint64(n)*24 > uint64(len(d.b)) {
			return nil, fmt.Errorf("submit of %d commands in %d bytes", n, len(d.b))
		}
		r.commands = make([]SubmitCommand, 0, n)
		for i := range n {
			c, err := decodeCommand(d)
			if err != nil {
				return nil, fmt.Errorf("command %d: %w", i, err)
			}
			r.commands = append(r.commands, c)
		}
	case frameDispatch:
		dr := &DispatchRequest{Pipeline: d.u64()}
		dr.Grid = [3]uint32{d.u32(), d.u32(), d.u32()}
		n := d.u32()
		if n > maxBindings {
			return nil, fmt.Errorf("dispatch with %d bindings, more than %d", n, maxBindings)
		}
		dr.Inputs = make([][]byte, n)
		dr.OutputCounts = make([]uint32, n)
		r.inputs = make([]segRange, n)
		has := make([]bool, n)
		for i := range n {
			flag := d.u32()
			if flag > 1 {
				return nil, fmt.Errorf("binding %d has input flag %d", i, flag)
			}
			has[i] = flag == 1
			dr.OutputCounts[i] = d.u32()
			r.inputs[i] = d.seg()
			if !has[i] && r.inputs[i] != (segRange{}) {
				return nil, fmt.Errorf("binding %d has no input but a staged range", i)
			}
		}
		m, nu := d.u32(), d.u32()
		if m > maxBindings {
			return nil, fmt.Errorf("dispatch with %d outputs, more than %d", m, maxBindings)
		}
		r.outputs = make([]segRange, m)
		for i := range m {
			r.outputs[i] = d.seg()
		}
		if uint64(nu) > uint64(len(d.b)) {
			return nil, fmt.Errorf("dispatch with %d uniform bytes in %d", nu, len(d.b))
		}
		if nu > 0 {
			dr.Uniforms = d.bytes(nu)
		}
		for i, ok := range has {
			if ok {
				dr.Inputs[i] = []byte{} // filled with the staged view by the caller
			}
		}
		r.dispatch = dr
	default:
		return nil, fmt.Errorf("unknown request kind %d", h.kind)
	}
	if err := d.end(); err != nil {
		return nil, err
	}
	if r.fd != wantFD {
		return nil, fmt.Errorf("request kind %d carries fd flag %v, want %v", h.kind, r.fd, wantFD)
	}
	return r, nil
}

func decodeCommand(d *dec) (SubmitCommand, error) {
	op := d.u8()
	d.zeros(3)
	length := d.u32()
	if d.err != nil {
		return nil, d.err
	}
	if length < 8 || uint64(length)-8 > uint64(len(d.b)) {
		return nil, fmt.Errorf("command length %d with %d bytes left", length, len(d.b))
	}
	body := &dec{b: d.take(int(length) - 8)}
	var c SubmitCommand
	switch op {
	case opDispatch:
		dc := DispatchCommand{Pipeline: body.u64()}
		dc.Grid = [3]uint32{body.u32(), body.u32(), body.u32()}
		nb, nu := body.u32(), body.u32()
		body.pad()
		if nb > maxBindings || uint64(nb)*24 > uint64(len(body.b)) {
			return nil, fmt.Errorf("dispatch with %d bindings in %d bytes", nb, len(body.b))
		}
		if nb > 0 {
			dc.Bindings = make([]BufferRange, nb)
		}
		for i := range dc.Bindings {
			dc.Bindings[i] = body.rng()
		}
		if uint64(nu) > uint64(len(body.b)) {
			return nil, fmt.Errorf("dispatch with %d uniform bytes in %d", nu, len(body.b))
		}
		if nu > 0 {
			dc.Uniforms = body.bytes(nu)
		}
		c = dc
	case opCopy:
		c = CopyCommand{Src: body.rng(), Dst: body.rng()}
	case opFill:
		fc := FillCommand{Dst: body.rng(), Value: body.u32()}
		body.pad()
		c = fc
	default:
		return nil, fmt.Errorf("unknown command opcode %d", op)
	}
	if err := body.end(); err != nil {
		return nil, err
	}
	return c, nil
}

// Completion statuses: how a request ended.
const (
	statusOK uint32 = iota
	statusRejected
	statusUnavailable
	statusDevice
	statusCanceled
	statusDeadline
	statusError
	statusUnimplemented
	statusBadResult // the backend's answer broke the contract (wrong number of outputs)
	statusCount
)

// done is a decoded completion (the host's side).
type done struct {
	seq    uint64
	status uint32
	msg    string

	// alloc
	buffer uint64
	mapped bool
	// submit, dispatch
	hostNanos, deviceNanos int64
	// dispatch: the size of each output written into its staged range
	sizes []uint64
	// submit, dispatch: the phases the plugin timed (spans.go); a pointer
	// keeps the completions without them small
	spans *[]Span
}

// encodeDone encodes a completion of a request of kind.
func encodeDone(kind frameKind, c *done) []byte {
	size := 64
	if c.spans != nil {
		size += spansBytes
	}
	e := &enc{b: make([]byte, frameHeaderBytes, size)}
	msg := c.msg
	if len(msg) > maxMessageBytes {
		msg = msg[:maxMessageBytes]
	}
	e.u32(c.status)
	e.u32(uint32(len(msg)))
	if c.status == statusOK {
		switch kind {
		case frameAlloc:
			e.u64(c.buffer)
			var m uint32
			if c.mapped {
				m = 1
			}
			e.u32(m)
			e.u32(0)
		case frameSubmit:
			e.u64(uint64(c.hostNanos))
			e.u64(uint64(c.deviceNanos))
		case frameDispatch:
			e.u64(uint64(c.hostNanos))
			e.u64(uint64(c.deviceNanos))
			e.u32(uint32(len(c.sizes)))
			e.u32(0)
			for _, s := range c.sizes {
				e.u64(s)
			}
		}
	}
	e.bytes([]byte(msg))
	var flags uint8
	if c.spans != nil && len(*c.spans) > 0 && (kind == frameSubmit || kind == frameDispatch) {
		flags = flagSpans
		encodeSpans(e, *c.spans)
	}
	putHeader(e.b, frameHeader{size: uint32(len(e.b)), kind: frameDone, flags: flags, seq: c.seq})
	return e.b
}

// maxDoneBytes bounds a completion frame: the largest result (a dispatch's
// output sizes), the longest message and the largest spans trailer.
const maxDoneBytes = frameHeaderBytes + 8 + 24 + 8*maxBindings + maxMessageBytes + 8 + spansBytes

// decodeDone decodes the completion of a request of kind that expected outputs
// output sizes (dispatch only). Anything but exactly the fields that request
// expects is an error.
func decodeDone(b []byte, kind frameKind, outputs int) (*done, error) {
	h, err := parseHeader(b, maxDoneBytes)
	if err != nil {
		return nil, err
	}
	if int(h.size) != len(b) || h.kind != frameDone || h.flags&^flagSpans != 0 {
		return nil, fmt.Errorf("completion frame of kind %d, flags %d, %d bytes for %d given", h.kind, h.flags, h.size, len(b))
	}
	d := &dec{b: b[frameHeaderBytes:]}
	c := &done{seq: h.seq, status: d.u32()}
	n := d.u32()
	if c.status >= statusCount || n > maxMessageBytes {
		return nil, fmt.Errorf("completion status %d with a message of %d bytes", c.status, n)
	}
	if c.status == statusOK {
		switch kind {
		case frameAlloc:
			c.buffer = d.u64()
			m := d.u32()
			d.pad()
			if m > 1 || c.buffer == 0 {
				return nil, fmt.Errorf("alloc completion with buffer %d, mapped flag %d", c.buffer, m)
			}
			c.mapped = m == 1
		case frameSubmit:
			c.hostNanos, c.deviceNanos = int64(d.u64()), int64(d.u64())
		case frameDispatch:
			c.hostNanos, c.deviceNanos = int64(d.u64()), int64(d.u64())
			m := d.u32()
			d.pad()
			if int64(m) != int64(outputs) {
				return nil, fmt.Errorf("dispatch completion reports %d outputs, the request has %d", m, outputs)
			}
			c.sizes = make([]uint64, m)
			for i := range c.sizes {
				c.sizes[i] = d.u64()
			}
		}
	}
	c.msg = string(d.bytes(n))
	if h.flags&flagSpans != 0 {
		if kind != frameSubmit && kind != frameDispatch {
			return nil, errNoSpans
		}
		spans, err := decodeSpans(d)
		if err != nil {
			return nil, err
		}
		c.spans = &spans
	}
	if err := d.end(); err != nil {
		return nil, err
	}
	return c, nil
}

// err turns a completion's status into the error kind the plugin returned.
func (d *done) err() error {
	if d.status == statusOK {
		return nil
	}
	msg := errors.New(d.msg)
	switch d.status {
	case statusRejected:
		return &RejectedError{Err: msg}
	case statusUnavailable:
		return &UnavailableError{Err: msg}
	case statusDevice:
		return &DeviceError{Err: msg}
	case statusCanceled:
		return fmt.Errorf("%s: %w", d.msg, context.Canceled)
	case statusDeadline:
		return fmt.Errorf("%s: %w", d.msg, context.DeadlineExceeded)
	case statusUnimplemented:
		return &UnimplementedError{Interface: d.msg}
	case statusBadResult:
		return &ResultError{Detail: d.msg}
	}
	return &PluginError{Err: msg}
}

// statusOf classifies a backend's error for a completion.
func statusOf(err error) uint32 {
	var (
		rej   *RejectedError
		unav  *UnavailableError
		dev   *DeviceError
		unimp *UnimplementedError
		bad   *badResult
	)
	switch {
	case err == nil:
		return statusOK
	case errors.As(err, &rej):
		return statusRejected
	case errors.As(err, &unav):
		return statusUnavailable
	case errors.As(err, &dev):
		return statusDevice
	case errors.As(err, &unimp):
		return statusUnimplemented
	case errors.As(err, &bad):
		return statusBadResult
	case errors.Is(err, context.Canceled):
		return statusCanceled
	case errors.Is(err, context.DeadlineExceeded):
		return statusDeadline
	}
	return statusError
}

// badResult is a backend answer that breaks the contract (a wrong number of
// outputs); it reaches the host as statusBadResult.
type badResult struct{ detail string }

func (e *badResult) Error() string { return e.detail }
