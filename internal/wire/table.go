package wire

import "fmt"

// Table is one side's record of each live buffer's size, by handle. Both sides
// keep one: the plugin's SDK checks requests against it before a backend sees
// them, the host's client checks what it sends. Its errors say what is wrong
// and end with "Fix: …"; each side returns them as a rejection.
type Table map[uint64]uint64

// end returns r.Offset+r.Size and whether it overflowed.
func (r Range) end() (uint64, bool) {
	e := r.Offset + r.Size
	return e, e < r.Offset
}

// Valid reports whether r lies inside a live buffer with an offset and size
// that are multiples of align (1 for any range). Callers on the submit path ask
// it first and describe the range only for an error: a submit of small
// dispatches costs microseconds, and formatting every binding's description
// was a tenth of a 1-element round trip.
func (t Table) Valid(r Range, align uint64) bool {
	size, ok := t[r.Buffer]
	end, overflow := r.end()
	return ok && !overflow && end <= size && r.Offset%align == 0 && r.Size%align == 0
}

// CheckRange says why r is not Valid: a range outside its buffer, of an
// unknown buffer, or not aligned.
func (t Table) CheckRange(what string, r Range, align uint64) error {
	if t.Valid(r, align) {
		return nil
	}
	size, ok := t[r.Buffer]
	if !ok {
		return fmt.Errorf("%s: buffer %d does not exist (never allocated, or freed). Fix: allocate it first", what, r.Buffer)
	}
	end, overflow := r.end()
	if overflow || end > size {
		return fmt.Errorf("%s: range [%d, %d+%d) lies outside buffer %d of %d bytes. Fix: keep offsets and sizes within the buffer", what, r.Offset, r.Offset, r.Size, r.Buffer, size)
	}
	return fmt.Errorf("%s: range [%d, %d+%d) of buffer %d is not aligned to %d-byte elements. Fix: use offsets and sizes that are multiples of %d", what, r.Offset, r.Offset, r.Size, r.Buffer, align, align)
}

// CheckCopy rejects a copy with a range outside its buffer, sizes that differ
// or ranges that overlap in one buffer.
func (t Table) CheckCopy(what string, dst, src Range) error {
	if !t.Valid(src, 1) {
		return t.CheckRange(what+" source", src, 1)
	}
	if !t.Valid(dst, 1) {
		return t.CheckRange(what+" destination", dst, 1)
	}
	if src.Size != dst.Size {
		return fmt.Errorf("%s copies %d bytes into a range of %d. Fix: give both ranges the same size", what, src.Size, dst.Size)
	}
	if src.Buffer == dst.Buffer && src.Offset < dst.Offset+dst.Size && dst.Offset < src.Offset+src.Size {
		return fmt.Errorf("%s: source and destination overlap in buffer %d. Fix: copy through a second buffer", what, src.Buffer)
	}
	return nil
}

// CheckCommands rejects a submit's commands with a range outside its buffer,
// a binding not aligned to bindingAlign or a fill not aligned to fillAlign, or
// a copy whose sizes differ or whose ranges overlap.
func (t Table) CheckCommands(cmds []Command, bindingAlign, fillAlign uint64) error {
	for i, c := range cmds {
		switch c.Op {
		case OpDispatch:
			for b, r := range c.Bindings {
				if !t.Valid(r, bindingAlign) {
					return t.CheckRange(fmt.Sprintf("command %d (dispatch), binding %d", i, b), r, bindingAlign)
				}
			}
		case OpCopy:
			if err := t.CheckCopy(fmt.Sprintf("command %d (copy)", i), c.Dst, c.Src); err != nil {
				return err
			}
		case OpFill:
			if !t.Valid(c.Dst, fillAlign) {
				return t.CheckRange(fmt.Sprintf("command %d (fill)", i), c.Dst, fillAlign)
			}
		default:
			return fmt.Errorf("command %d has unknown operation %d. Fix: use a dispatch, copy or fill", i, c.Op)
		}
	}
	return nil
}
