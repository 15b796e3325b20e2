package wire

import (
	"strings"
	"testing"
)

// TestTableChecks pins the buffer table both sides check ranges against: what
// passes, and what each refusal says.
func TestTableChecks(t *testing.T) {
	tab := Table{1: 64, 2: 16}
	for _, c := range []struct {
		name string
		err  error
		want string // "" passes
	}{
		{"inside", tab.CheckRange("write", Range{Buffer: 1, Offset: 8, Size: 56}, 1), ""},
		{"unknown buffer", tab.CheckRange("write", Range{Buffer: 9, Size: 4}, 1), "buffer 9 does not exist"},
		{"past the end", tab.CheckRange("write", Range{Buffer: 2, Offset: 8, Size: 16}, 1), "lies outside buffer 2 of 16 bytes"},
		{"offset overflow", tab.CheckRange("write", Range{Buffer: 1, Offset: ^uint64(0) - 3, Size: 8}, 1), "lies outside buffer 1"},
		{"unaligned", tab.CheckRange("fill", Range{Buffer: 1, Offset: 2, Size: 4}, 4), "not aligned to 4-byte elements"},
		{"copy", tab.CheckCopy("copy", Range{Buffer: 2, Size: 16}, Range{Buffer: 1, Offset: 48, Size: 16}), ""},
		{"copy sizes differ", tab.CheckCopy("copy", Range{Buffer: 2, Size: 8}, Range{Buffer: 1, Size: 16}), "copies 16 bytes into a range of 8"},
		{"copy overlap", tab.CheckCopy("copy", Range{Buffer: 1, Offset: 8, Size: 16}, Range{Buffer: 1, Size: 16}), "overlap in buffer 1"},
		{"copy source outside", tab.CheckCopy("copy", Range{Buffer: 2, Size: 16}, Range{Buffer: 1, Offset: 60, Size: 16}), "copy source: range"},
		{"commands", tab.CheckCommands([]Command{
			{Op: OpDispatch, Bindings: []Range{{Buffer: 1, Size: 6}}},
			{Op: OpCopy, Src: Range{Buffer: 1, Size: 16}, Dst: Range{Buffer: 2, Size: 16}},
			{Op: OpFill, Dst: Range{Buffer: 2, Size: 16}},
		}, 2, 4), ""},
		{"binding unaligned", tab.CheckCommands([]Command{{Op: OpDispatch, Bindings: []Range{{Buffer: 1, Offset: 1, Size: 4}}}}, 2, 4), "command 0 (dispatch), binding 0"},
		{"fill unaligned", tab.CheckCommands([]Command{{Op: OpFill, Dst: Range{Buffer: 1, Size: 4}}, {Op: OpFill, Dst: Range{Buffer: 1, Size: 6}}}, 2, 4), "command 1 (fill)"},
		{"unknown op", tab.CheckCommands([]Command{{Op: 99}}, 2, 4), "unknown operation 99"},
	} {
		switch {
		case c.want == "" && c.err != nil:
			t.Errorf("%s: %v", c.name, c.err)
		case c.want != "" && (c.err == nil || !strings.Contains(c.err.Error(), c.want) || !strings.Contains(c.err.Error(), "Fix: ")):
			t.Errorf("%s: %v, want an error saying %q and how to fix it", c.name, c.err, c.want)
		}
	}
}
