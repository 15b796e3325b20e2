package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The fast path's frames: fixed little-endian binary records in the data plane's
// rings (the hello frame alone on its unix socket). internal/wire/doc.go and
// docs/design.md ("Fast path: frames") give the format; the encoders and
// decoders here are its only implementation, and the decoders of both sides are
// fuzzed.

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
func (e *enc) rng(r Range) { e.u64(r.Buffer); e.u64(r.Offset); e.u64(r.Size) }

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
func (d *dec) pad()       { d.zeros(4) }
func (d *dec) rng() Range { return Range{Buffer: d.u64(), Offset: d.u64(), Size: d.u64()} }

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

// SegRange is a range of a shared segment: where request bytes are staged.
type SegRange struct {
	Segment      uint32
	Offset, Size uint64
}

func (e *enc) seg(r SegRange) { e.u32(r.Segment); e.u32(0); e.u64(r.Offset); e.u64(r.Size) }
func (d *dec) seg() SegRange {
	r := SegRange{Segment: d.u32()}
	d.pad()
	r.Offset, r.Size = d.u64(), d.u64()
	return r
}

// Request is a request frame: what the host's plane encodes and the plugin's decodes.
type Request struct {
	Kind FrameKind
	Seq  uint64
	FD   bool

	Token []byte // hello

	Segment uint32 // attach, detach, alloc (0: none)
	Size    uint64 // attach, alloc

	Adapter uint32 // alloc, submit
	Usage   uint32

	Buffer uint64   // free, write, read
	Offset uint64   // write, read
	Data   SegRange // write, read: the staged bytes

	Commands []Command // submit

	Src, Dst Range // copy

	Dispatch *Dispatch  // dispatch
	Inputs   []SegRange // dispatch: by binding; size 0 with segment 0 is no input
	Outputs  []SegRange // dispatch: where each output goes
}

// Range is a range of one of the plugin's buffers (pluginapi.BufferRange on
// the wire).
type Range struct{ Buffer, Offset, Size uint64 }

// Command is one command of a submit frame (pluginapi.SubmitCommand on the
// wire): Op says which, and which fields count — OpDispatch: Pipeline, Grid,
// Bindings, Uniforms; OpCopy: Src, Dst; OpFill: Dst, Value.
type Command struct {
	Op       uint8
	Pipeline uint64
	Grid     [3]uint32
	Bindings []Range
	Uniforms []byte
	Src, Dst Range
	Value    uint32
}

// Dispatch is the dispatch frame's share of pluginapi.DispatchRequest; the
// inputs' bytes travel in staged ranges, so a decoded Dispatch has an empty,
// non-nil input for each binding that has one, for the plane to fill in.
type Dispatch struct {
	Pipeline     uint64
	Grid         [3]uint32
	Inputs       [][]byte
	OutputCounts []uint32
	Uniforms     []byte
}

// Span is one timed phase of a completion's spans trailer (pluginapi.Span on
// the wire): Kind is 1 to SpanKinds.
type Span struct {
	Kind       uint32
	Start, End int64
}

// SpanKinds is the number of span kinds; pluginapi names them.
const SpanKinds = 6

// Command opcodes inside a submit frame.
const (
	OpDispatch = 1
	OpCopy     = 2
	OpFill     = 3
)

// MaxBindings bounds a dispatch's bindings on the wire (the IR allows 32 buffers).
const MaxBindings = 64

// EncodeRequest encodes r as one frame.
func EncodeRequest(r *Request) ([]byte, error) {
	e := &enc{b: make([]byte, FrameHeaderBytes, 256)}
	switch r.Kind {
	case FrameHello:
		e.u32(uint32(len(r.Token)))
		e.u32(0)
		e.bytes(r.Token)
	case FrameAttach:
		e.u32(r.Segment)
		e.u32(0)
		e.u64(r.Size)
	case FrameDetach:
		e.u32(r.Segment)
		e.u32(0)
	case FrameAlloc:
		e.u32(r.Adapter)
		e.u32(r.Usage)
		e.u64(r.Size)
		e.u32(r.Segment)
		e.u32(0)
	case FrameFree:
		e.u64(r.Buffer)
	case FrameWrite, FrameRead:
		e.u64(r.Buffer)
		e.u64(r.Offset)
		e.seg(r.Data)
	case FrameCopy:
		e.rng(r.Src)
		e.rng(r.Dst)
	case FrameSubmit:
		e.u32(r.Adapter)
		e.u32(uint32(len(r.Commands)))
		for i, c := range r.Commands {
			if err := encodeCommand(e, c); err != nil {
				return nil, fmt.Errorf("command %d: %w", i, err)
			}
			if len(e.b) > MaxRequestFrameBytes {
				break
			}
		}
	case FrameDispatch:
		d := r.Dispatch
		e.u64(d.Pipeline)
		e.u32(d.Grid[0])
		e.u32(d.Grid[1])
		e.u32(d.Grid[2])
		e.u32(uint32(len(r.Inputs)))
		for i, in := range r.Inputs {
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
		e.u32(uint32(len(r.Outputs)))
		e.u32(uint32(len(d.Uniforms)))
		for _, out := range r.Outputs {
			e.seg(out)
		}
		e.bytes(d.Uniforms)
	default:
		return nil, fmt.Errorf("no request frame of kind %d", r.Kind)
	}
	if len(e.b) > MaxRequestFrameBytes {
		return nil, fmt.Errorf("the request encodes to %d bytes, more than a frame's %d", len(e.b), MaxRequestFrameBytes)
	}
	var flags uint8
	if r.FD {
		flags = FlagFD
	}
	PutHeader(e.b, FrameHeader{Size: uint32(len(e.b)), Kind: r.Kind, Flags: flags, Seq: r.Seq})
	return e.b, nil
}

// CommandsBytes is the size cmds encode to in a submit frame, commands that do
// not encode left out.
func CommandsBytes(cmds []Command) int {
	e := &enc{}
	for _, c := range cmds {
		_ = encodeCommand(e, c)
	}
	return len(e.b)
}

func encodeCommand(e *enc, c Command) error {
	start := len(e.b)
	switch c.Op {
	case OpDispatch:
		if len(c.Bindings) > MaxBindings {
			return fmt.Errorf("%d bindings, more than %d", len(c.Bindings), MaxBindings)
		}
		if len(c.Uniforms) > MaxRequestFrameBytes {
			return fmt.Errorf("%d uniform bytes, more than a frame's %d", len(c.Uniforms), MaxRequestFrameBytes)
		}
		e.u8(OpDispatch)
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
	case OpCopy:
		e.u8(OpCopy)
		e.b = append(e.b, 0, 0, 0, 0, 0, 0, 0)
		e.rng(c.Src)
		e.rng(c.Dst)
	case OpFill:
		e.u8(OpFill)
		e.b = append(e.b, 0, 0, 0, 0, 0, 0, 0)
		e.rng(c.Dst)
		e.u32(c.Value)
		e.u32(0)
	default:
		return fmt.Errorf("unknown command opcode %d", c.Op)
	}
	binary.LittleEndian.PutUint32(e.b[start+4:], uint32(len(e.b)-start))
	return nil
}

// DecodeRequest decodes a request frame the plugin received. It checks the
// frame's structure only (counts against the bytes present, reserved fields);
// ranges are checked against the tables by the caller.
func DecodeRequest(b []byte) (*Request, error) {
	h, err := ParseHeader(b, MaxRequestFrameBytes)
	if err != nil {
		return nil, err
	}
	if int(h.Size) != len(b) || h.Flags&FlagSpans != 0 {
		return nil, fmt.Errorf("frame says %d bytes but %d were given (flags %#x)", h.Size, len(b), h.Flags)
	}
	r := &Request{Kind: h.Kind, Seq: h.Seq, FD: h.Flags&FlagFD != 0}
	d := &dec{b: b[FrameHeaderBytes:]}
	wantFD := false
	switch h.Kind {
	case FrameHello:
		n := d.u32()
		d.pad()
		if n > MaxTokenBytes {
			return nil, fmt.Errorf("hello token of %d bytes, more than %d", n, MaxTokenBytes)
		}
		r.Token = d.bytes(n)
		wantFD = true // the ring segment
	case FrameAttach:
		r.Segment = d.u32()
		d.pad()
		r.Size = d.u64()
		wantFD = true
		if r.Segment == 0 || r.Size == 0 {
			return nil, fmt.Errorf("attach of segment %d with %d bytes", r.Segment, r.Size)
		}
	case FrameDetach:
		r.Segment = d.u32()
		d.pad()
	case FrameAlloc:
		r.Adapter = d.u32()
		r.Usage = d.u32()
		r.Size = d.u64()
		r.Segment = d.u32()
		d.pad()
		wantFD = r.Segment != 0
	case FrameFree:
		r.Buffer = d.u64()
	case FrameWrite, FrameRead:
		r.Buffer = d.u64()
		r.Offset = d.u64()
		r.Data = d.seg()
	case FrameCopy:
		r.Src, r.Dst = d.rng(), d.rng()
	case FrameSubmit:
		r.Adapter = d.u32()
		n := d.u32()
		if uint64(n)*24 > uint64(len(d.b)) {
			return nil, fmt.Errorf("submit of %d commands in %d bytes", n, len(d.b))
		}
		r.Commands = make([]Command, 0, n)
		for i := range n {
			c, err := decodeCommand(d)
			if err != nil {
				return nil, fmt.Errorf("command %d: %w", i, err)
			}
			r.Commands = append(r.Commands, c)
		}
	case FrameDispatch:
		dr := &Dispatch{Pipeline: d.u64()}
		dr.Grid = [3]uint32{d.u32(), d.u32(), d.u32()}
		n := d.u32()
		if n > MaxBindings {
			return nil, fmt.Errorf("dispatch with %d bindings, more than %d", n, MaxBindings)
		}
		dr.Inputs = make([][]byte, n)
		dr.OutputCounts = make([]uint32, n)
		r.Inputs = make([]SegRange, n)
		has := make([]bool, n)
		for i := range n {
			flag := d.u32()
			if flag > 1 {
				return nil, fmt.Errorf("binding %d has input flag %d", i, flag)
			}
			has[i] = flag == 1
			dr.OutputCounts[i] = d.u32()
			r.Inputs[i] = d.seg()
			if !has[i] && r.Inputs[i] != (SegRange{}) {
				return nil, fmt.Errorf("binding %d has no input but a staged range", i)
			}
		}
		m, nu := d.u32(), d.u32()
		if m > MaxBindings {
			return nil, fmt.Errorf("dispatch with %d outputs, more than %d", m, MaxBindings)
		}
		r.Outputs = make([]SegRange, m)
		for i := range m {
			r.Outputs[i] = d.seg()
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
		r.Dispatch = dr
	default:
		return nil, fmt.Errorf("unknown request kind %d", h.Kind)
	}
	if err := d.end(); err != nil {
		return nil, err
	}
	if r.FD != wantFD {
		return nil, fmt.Errorf("request kind %d carries fd flag %v, want %v", h.Kind, r.FD, wantFD)
	}
	return r, nil
}

func decodeCommand(d *dec) (Command, error) {
	op := d.u8()
	d.zeros(3)
	length := d.u32()
	if d.err != nil {
		return Command{}, d.err
	}
	if length < 8 || uint64(length)-8 > uint64(len(d.b)) {
		return Command{}, fmt.Errorf("command length %d with %d bytes left", length, len(d.b))
	}
	body := &dec{b: d.take(int(length) - 8)}
	var c Command
	switch op {
	case OpDispatch:
		dc := Command{Op: OpDispatch, Pipeline: body.u64()}
		dc.Grid = [3]uint32{body.u32(), body.u32(), body.u32()}
		nb, nu := body.u32(), body.u32()
		body.pad()
		if nb > MaxBindings || uint64(nb)*24 > uint64(len(body.b)) {
			return Command{}, fmt.Errorf("dispatch with %d bindings in %d bytes", nb, len(body.b))
		}
		if nb > 0 {
			dc.Bindings = make([]Range, nb)
		}
		for i := range dc.Bindings {
			dc.Bindings[i] = body.rng()
		}
		if uint64(nu) > uint64(len(body.b)) {
			return Command{}, fmt.Errorf("dispatch with %d uniform bytes in %d", nu, len(body.b))
		}
		if nu > 0 {
			dc.Uniforms = body.bytes(nu)
		}
		c = dc
	case OpCopy:
		c = Command{Op: OpCopy, Src: body.rng(), Dst: body.rng()}
	case OpFill:
		fc := Command{Op: OpFill, Dst: body.rng(), Value: body.u32()}
		body.pad()
		c = fc
	default:
		return Command{}, fmt.Errorf("unknown command opcode %d", op)
	}
	if err := body.end(); err != nil {
		return Command{}, err
	}
	return c, nil
}

// Completion statuses: how a request ended.
const (
	StatusOK uint32 = iota
	StatusRejected
	StatusUnavailable
	StatusDevice
	StatusCanceled
	StatusDeadline
	StatusError
	StatusUnimplemented
	StatusBadResult // the backend's answer broke the contract (wrong number of outputs)
	StatusCount
)

// Done is a completion: what the plugin's plane encodes and the host's decodes.
type Done struct {
	Seq    uint64
	Status uint32
	Msg    string

	// alloc
	Buffer uint64
	Mapped bool
	// submit, dispatch
	HostNanos, DeviceNanos int64
	// dispatch: the size of each output written into its staged range
	Sizes []uint64
	// submit, dispatch: the phases the plugin timed (pluginapi.SpansEnv); a pointer
	// keeps the completions without them small
	Spans *[]Span
}

// EncodeDone encodes a completion of a request of kind.
func EncodeDone(kind FrameKind, c *Done) []byte {
	size := 64
	if c.Spans != nil {
		size += SpansBytes
	}
	e := &enc{b: make([]byte, FrameHeaderBytes, size)}
	msg := c.Msg
	if len(msg) > MaxMessageBytes {
		msg = msg[:MaxMessageBytes]
	}
	e.u32(c.Status)
	e.u32(uint32(len(msg)))
	if c.Status == StatusOK {
		switch kind {
		case FrameAlloc:
			e.u64(c.Buffer)
			var m uint32
			if c.Mapped {
				m = 1
			}
			e.u32(m)
			e.u32(0)
		case FrameSubmit:
			e.u64(uint64(c.HostNanos))
			e.u64(uint64(c.DeviceNanos))
		case FrameDispatch:
			e.u64(uint64(c.HostNanos))
			e.u64(uint64(c.DeviceNanos))
			e.u32(uint32(len(c.Sizes)))
			e.u32(0)
			for _, s := range c.Sizes {
				e.u64(s)
			}
		}
	}
	e.bytes([]byte(msg))
	var flags uint8
	if c.Spans != nil && len(*c.Spans) > 0 && (kind == FrameSubmit || kind == FrameDispatch) {
		flags = FlagSpans
		encodeSpans(e, *c.Spans)
	}
	PutHeader(e.b, FrameHeader{Size: uint32(len(e.b)), Kind: FrameDone, Flags: flags, Seq: c.Seq})
	return e.b
}

// MaxDoneBytes bounds a completion frame: the largest result (a dispatch's
// output sizes), the longest message and the largest spans trailer.
const MaxDoneBytes = FrameHeaderBytes + 8 + 24 + 8*MaxBindings + MaxMessageBytes + 8 + SpansBytes

// DecodeDone decodes the completion of a request of kind that expected outputs
// output sizes (dispatch only). Anything but exactly the fields that request
// expects is an error.
func DecodeDone(b []byte, kind FrameKind, outputs int) (*Done, error) {
	h, err := ParseHeader(b, MaxDoneBytes)
	if err != nil {
		return nil, err
	}
	if int(h.Size) != len(b) || h.Kind != FrameDone || h.Flags&^FlagSpans != 0 {
		return nil, fmt.Errorf("completion frame of kind %d, flags %d, %d bytes for %d given", h.Kind, h.Flags, h.Size, len(b))
	}
	d := &dec{b: b[FrameHeaderBytes:]}
	c := &Done{Seq: h.Seq, Status: d.u32()}
	n := d.u32()
	if c.Status >= StatusCount || n > MaxMessageBytes {
		return nil, fmt.Errorf("completion status %d with a message of %d bytes", c.Status, n)
	}
	if c.Status == StatusOK {
		switch kind {
		case FrameAlloc:
			c.Buffer = d.u64()
			m := d.u32()
			d.pad()
			if m > 1 || c.Buffer == 0 {
				return nil, fmt.Errorf("alloc completion with buffer %d, mapped flag %d", c.Buffer, m)
			}
			c.Mapped = m == 1
		case FrameSubmit:
			c.HostNanos, c.DeviceNanos = int64(d.u64()), int64(d.u64())
		case FrameDispatch:
			c.HostNanos, c.DeviceNanos = int64(d.u64()), int64(d.u64())
			m := d.u32()
			d.pad()
			if int64(m) != int64(outputs) {
				return nil, fmt.Errorf("dispatch completion reports %d outputs, the request has %d", m, outputs)
			}
			c.Sizes = make([]uint64, m)
			for i := range c.Sizes {
				c.Sizes[i] = d.u64()
			}
		}
	}
	c.Msg = string(d.bytes(n))
	if h.Flags&FlagSpans != 0 {
		if kind != FrameSubmit && kind != FrameDispatch {
			return nil, ErrNoSpans
		}
		spans, err := decodeSpans(d)
		if err != nil {
			return nil, err
		}
		c.Spans = &spans
	}
	if err := d.end(); err != nil {
		return nil, err
	}
	return c, nil
}

// MaxSpans bounds the spans of one completion; SpanBytes is one span's size
// on the wire (u32 kind, u32 zero, u64 start, u64 end) and SpansBytes the
// largest trailer (u32 count, u32 zero, the spans).
const (
	MaxSpans   = 8
	SpanBytes  = 24
	SpansBytes = 8 + MaxSpans*SpanBytes
)

// encodeSpans appends the trailer of spans (at most MaxSpans are taken).
func encodeSpans(e *enc, spans []Span) {
	spans = spans[:min(len(spans), MaxSpans)]
	e.u32(uint32(len(spans)))
	e.u32(0)
	for _, s := range spans {
		e.u32(uint32(s.Kind))
		e.u32(0)
		e.u64(uint64(s.Start))
		e.u64(uint64(s.End))
	}
}

// decodeSpans reads a trailer: at most MaxSpans spans of known kinds, each
// starting at a positive time and ending no earlier.
func decodeSpans(d *dec) ([]Span, error) {
	n := d.u32()
	d.pad()
	if d.err != nil {
		return nil, d.err
	}
	if n == 0 || n > MaxSpans {
		return nil, fmt.Errorf("completion carries %d spans, want 1 to %d", n, MaxSpans)
	}
	spans := make([]Span, n)
	for i := range spans {
		s := Span{Kind: d.u32()}
		d.pad()
		s.Start, s.End = int64(d.u64()), int64(d.u64())
		if d.err != nil {
			return nil, d.err
		}
		if s.Kind < 1 || s.Kind > SpanKinds || s.Start <= 0 || s.End < s.Start {
			return nil, fmt.Errorf("span %d of kind %d runs from %d to %d", i, s.Kind, s.Start, s.End)
		}
		spans[i] = s
	}
	return spans, nil
}

// ErrNoSpans refuses a spans trailer on a completion that cannot have one.
var ErrNoSpans = errors.New("completion carries spans but answers no submit or dispatch")
