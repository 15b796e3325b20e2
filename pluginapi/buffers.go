package pluginapi

import (
	"fmt"
	"math"
	"strings"

	"github.com/kiln-dev/kiln/internal/wire"
	"github.com/kiln-dev/kiln/ir"
)

// BufferUsage says how a buffer will be used; a backend may place it by usage.
type BufferUsage uint32

// The usage bits. Zero means UsageStorage | UsageCopySrc | UsageCopyDst.
const (
	// UsageStorage: bound to dispatches.
	UsageStorage BufferUsage = 1 << iota
	// UsageCopySrc and UsageCopyDst: the source or destination of copies,
	// fills, writes and reads.
	UsageCopySrc
	UsageCopyDst
	// UsageMap: the host maps the buffer and fills or reads it in place. With
	// the shared-memory data plane the SDK offers the backend host memory for
	// it (AllocRequest.Shared).
	UsageMap
)

// usageMask holds every defined usage bit.
const usageMask = UsageStorage | UsageCopySrc | UsageCopyDst | UsageMap

// String lists the bits: "storage|copy-src|map".
func (u BufferUsage) String() string {
	var parts []string
	for _, b := range []struct {
		bit  BufferUsage
		name string
	}{{UsageStorage, "storage"}, {UsageCopySrc, "copy-src"}, {UsageCopyDst, "copy-dst"}, {UsageMap, "map"}} {
		if u&b.bit != 0 {
			parts = append(parts, b.name)
		}
	}
	if rest := u &^ usageMask; rest != 0 {
		parts = append(parts, fmt.Sprintf("%#x", uint32(rest)))
	}
	if len(parts) == 0 {
		return "default"
	}
	return strings.Join(parts, "|")
}

// ElementBytes is the size of a buffer element of IR v1 and v1.1: offsets and
// sizes of fills are multiples of it.
const ElementBytes = 4

// BindingAlign is what offsets and sizes of dispatch bindings are multiples
// of: the smallest element, IR v1.2's 2-byte f16 and bf16 (a buffer of them
// may hold an odd number).
const BindingAlign = 2

// MaxBufferBytes is the largest buffer the wire can describe: a binding's length
// is a u32 element count in the IR.
const MaxBufferBytes = math.MaxUint32 * ElementBytes

// AllocRequest asks for a buffer.
type AllocRequest struct {
	Adapter int
	// Size is the buffer's length in bytes (at most MaxBufferBytes).
	Size  uint64
	Usage BufferUsage
	// Shared, when non-nil, is Size bytes of memory the host maps too (a segment
	// of the shared-memory data plane, offered for UsageMap buffers). A backend
	// that can run on host memory keeps the buffer's contents there and sets
	// AllocResult.Mapped: the host then reads and writes them in place, with no
	// call at all. Shared is valid until FreeBuffer returns.
	Shared []byte
	// SharedSegment and SharedOffset say where Shared lies in the data plane:
	// in the segment of that id (as announced to [Segments.AttachSegment] before
	// this call) from that byte offset, so that a backend that registered the
	// segment with its driver can address the buffer as device-visible host
	// memory. SharedSegment is 0 when Shared is nil or is no segment's memory.
	SharedSegment uint64
	SharedOffset  uint64
}

// AllocResult is a new buffer.
type AllocResult struct {
	// Buffer is the handle the other calls take; 0 is not a valid handle.
	Buffer uint64
	// Mapped reports that the buffer's contents live in AllocRequest.Shared.
	Mapped bool
}

// BufferRange is Size bytes of a buffer from Offset.
type BufferRange struct {
	Buffer       uint64
	Offset, Size uint64
}

// SubmitCommand is one step of a [SubmitRequest]: a [DispatchCommand],
// [CopyCommand] or [FillCommand].
type SubmitCommand interface{ command() }

// DispatchCommand runs a pipeline over buffer ranges.
type DispatchCommand struct {
	Pipeline uint64
	// Grid is the number of workgroups on each axis; 0 on an axis runs nothing.
	Grid [3]uint32
	// Bindings are by binding: the range each program buffer is bound to. A
	// binding's element count (the program's len) is Size/4. Write buffers are
	// not cleared: elements a dispatch does not store keep their contents.
	Bindings []BufferRange
	// Uniforms are the dispatch's uniform values, laid out as the program
	// declares them (empty for programs without uniforms).
	Uniforms []byte
}

// CopyCommand copies Size bytes between buffers (the ranges may be of one buffer
// but must not overlap).
type CopyCommand struct {
	Src, Dst BufferRange
}

// FillCommand repeats the 32-bit little-endian Value over Dst.
type FillCommand struct {
	Dst   BufferRange
	Value uint32
}

func (DispatchCommand) command() {}
func (CopyCommand) command()     {}
func (FillCommand) command()     {}

// SubmitRequest is an ordered batch of commands on one adapter. A copy whose
// source or destination lives on another adapter is run by the SDK through
// [PeerCopier], between the backend's Submit calls for the commands around it,
// so Submitter.Submit never gets one.
type SubmitRequest struct {
	Adapter  int
	Commands []SubmitCommand
}

// SubmitResult is the completion of a batch.
type SubmitResult struct {
	// HostNanos is the wall time of the batch as the plugin saw it; zero lets the
	// SDK fill in the time the Submit call took.
	HostNanos int64
	// DeviceNanos is the device-measured time, zero when the backend cannot tell.
	DeviceNanos int64
}

// ArtifactRequest asks for the device code of a program.
type ArtifactRequest struct {
	Adapter int
	// Program, Spec and WorkgroupSize are as in CompileRequest (validated by the
	// SDK).
	Program       *ir.Program
	Spec          ir.SpecMap
	WorkgroupSize [3]uint32
	// Kind is what to emit: "spirv", "ptx", ...
	Kind string
}

// Artifact is device code.
type Artifact struct {
	Data []byte
	// Info holds facts about it ("entry_point": "main", ...).
	Info map[string]string
}

// bufferTable is the SDK's record of each live buffer's size, by handle
// (internal/wire's Table, which the host's client keeps too): the SDK checks
// requests against it before a backend sees them.
type bufferTable wire.Table

// checkRange rejects a range outside its buffer, of an unknown buffer, or whose
// offset or size is not a multiple of align (1 for any range).
func (t bufferTable) checkRange(what string, r BufferRange, align uint64) error {
	if err := wire.Table(t).CheckRange(what, wire.Range(r), align); err != nil {
		return &RejectedError{Err: err}
	}
	return nil
}

// valid reports whether checkRange passes r, without describing it.
func (t bufferTable) valid(r BufferRange, align uint64) bool {
	return wire.Table(t).Valid(wire.Range(r), align)
}

// checkCopy rejects a copy with a range outside its buffer, sizes that differ
// or ranges that overlap in one buffer.
func (t bufferTable) checkCopy(what string, dst, src BufferRange) error {
	if err := wire.Table(t).CheckCopy(what, wire.Range(dst), wire.Range(src)); err != nil {
		return &RejectedError{Err: err}
	}
	return nil
}

// checkCommands rejects a batch with a range outside its buffer, an unaligned
// binding or fill, a copy whose sizes differ or whose ranges overlap, or an
// unknown command.
func (t bufferTable) checkCommands(cmds []SubmitCommand) error {
	for i, c := range cmds {
		switch c := c.(type) {
		case DispatchCommand:
			for b, r := range c.Bindings {
				if !t.valid(r, BindingAlign) {
					return t.checkRange(fmt.Sprintf("command %d (dispatch), binding %d", i, b), r, BindingAlign)
				}
			}
		case CopyCommand:
			if err := t.checkCopy(fmt.Sprintf("command %d (copy)", i), c.Dst, c.Src); err != nil {
				return err
			}
		case FillCommand:
			if !t.valid(c.Dst, ElementBytes) {
				return t.checkRange(fmt.Sprintf("command %d (fill)", i), c.Dst, ElementBytes)
			}
		default:
			return Rejected("command %d is a %T, which the SDK does not know. Fix: use DispatchCommand, CopyCommand or FillCommand", i, c)
		}
	}
	return nil
}
