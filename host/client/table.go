package client

import (
	"fmt"

	"github.com/kiln-dev/kiln/pluginapi"
)

// bufferTable is the host's record of each live buffer's size, by handle: the
// host checks what it sends against it (the plugin's SDK keeps its own and
// checks again).
type bufferTable map[uint64]uint64

// checkRange rejects a range outside its buffer, of an unknown buffer, or whose
// offset or size is not a multiple of align (1 for any range).
func (t bufferTable) checkRange(what string, r pluginapi.BufferRange, align uint64) error {
	if t.valid(r, align) {
		return nil
	}
	size, ok := t[r.Buffer]
	if !ok {
		return pluginapi.Rejected("%s: buffer %d does not exist (never allocated, or freed). Fix: allocate it first", what, r.Buffer)
	}
	end, overflow := rangeEnd(r)
	if overflow || end > size {
		return pluginapi.Rejected("%s: range [%d, %d+%d) lies outside buffer %d of %d bytes. Fix: keep offsets and sizes within the buffer", what, r.Offset, r.Offset, r.Size, r.Buffer, size)
	}
	if r.Offset%align != 0 || r.Size%align != 0 {
		return pluginapi.Rejected("%s: range [%d, %d+%d) of buffer %d is not aligned to %d-byte elements. Fix: use offsets and sizes that are multiples of %d", what, r.Offset, r.Offset, r.Size, r.Buffer, align, align)
	}
	return nil
}

// valid reports whether checkRange passes r. Callers on the submit path ask it
// first and describe the range only for an error: a submit of small dispatches
// costs microseconds, and formatting every binding's description was a tenth
// of a 1-element round trip.
func (t bufferTable) valid(r pluginapi.BufferRange, align uint64) bool {
	size, ok := t[r.Buffer]
	end, overflow := rangeEnd(r)
	return ok && !overflow && end <= size && r.Offset%align == 0 && r.Size%align == 0
}

// checkCopy rejects a copy with a range outside its buffer, sizes that differ
// or ranges that overlap in one buffer.
func (t bufferTable) checkCopy(what string, dst, src pluginapi.BufferRange) error {
	if !t.valid(src, 1) {
		return t.checkRange(what+" source", src, 1)
	}
	if !t.valid(dst, 1) {
		return t.checkRange(what+" destination", dst, 1)
	}
	if src.Size != dst.Size {
		return pluginapi.Rejected("%s copies %d bytes into a range of %d. Fix: give both ranges the same size", what, src.Size, dst.Size)
	}
	if src.Buffer == dst.Buffer && src.Offset < dst.Offset+dst.Size && dst.Offset < src.Offset+src.Size {
		return pluginapi.Rejected("%s: source and destination overlap in buffer %d. Fix: copy through a second buffer", what, src.Buffer)
	}
	return nil
}

// checkCommands rejects a batch with a range outside its buffer, an unaligned
// binding or fill, a copy whose sizes differ or whose ranges overlap, or an
// unknown command.
func (t bufferTable) checkCommands(cmds []pluginapi.SubmitCommand) error {
	for i, c := range cmds {
		switch c := c.(type) {
		case pluginapi.DispatchCommand:
			for b, r := range c.Bindings {
				if !t.valid(r, pluginapi.BindingAlign) {
					return t.checkRange(fmt.Sprintf("command %d (dispatch), binding %d", i, b), r, pluginapi.BindingAlign)
				}
			}
		case pluginapi.CopyCommand:
			if err := t.checkCopy(fmt.Sprintf("command %d (copy)", i), c.Dst, c.Src); err != nil {
				return err
			}
		case pluginapi.FillCommand:
			if !t.valid(c.Dst, pluginapi.ElementBytes) {
				return t.checkRange(fmt.Sprintf("command %d (fill)", i), c.Dst, pluginapi.ElementBytes)
			}
		default:
			return pluginapi.Rejected("command %d is a %T, which the SDK does not know. Fix: use pluginapi.DispatchCommand, pluginapi.CopyCommand or pluginapi.FillCommand", i, c)
		}
	}
	return nil
}

// rangeEnd returns r.Offset+r.Size and whether it overflowed.
func rangeEnd(r pluginapi.BufferRange) (uint64, bool) {
	e := r.Offset + r.Size
	return e, e < r.Offset
}
