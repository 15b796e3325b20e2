package kit

import (
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/pluginapi"
)

func TestCheckPinned(t *testing.T) {
	b := ir.NewBuilder("t.pinned", 1, 1, 1)
	b.Buffer("f", ir.F32, ir.Write)
	b.Buffer("u", ir.U32, ir.Write)
	s := semantic{prog: b.MustBuild(), pinned: [][]uint32{{0x7FC00000}, {5, 6}}}
	if err := checkPinned(s, [][]byte{words([]uint32{0xFFC00001}), words([]uint32{5, 6, 7})}); err != nil {
		t.Errorf("matching pins (another NaN for a NaN) rejected: %v", err)
	}
	err := checkPinned(s, [][]byte{words([]uint32{0x7FC00000}), words([]uint32{5, 9})})
	if err == nil || !strings.Contains(err.Error(), "u[1] is 9") || !strings.Contains(err.Error(), "the table says 6") {
		t.Errorf("a wrong pinned value: %v", err)
	}
	if err := checkPinned(s, [][]byte{words([]uint32{0x7FC00000}), words([]uint32{5})}); err == nil {
		t.Error("an output shorter than its pins accepted")
	}
}

func TestSubgroupUseAndClaims(t *testing.T) {
	build := func(size uint32, e ir.Expr) *ir.Program {
		b := ir.NewBuilder("t.sg", 64, 1, 1)
		b.RequireSubgroupSize(size)
		out := b.Buffer("out", ir.U32, ir.Write)
		b.If(ir.LitBool(true), func(then *ir.Block) { then.Store(out, ir.LitU32(0), e) })
		return b.MustBuild()
	}
	plain := build(0, ir.LitU32(1))
	builtin := build(0, ir.SubgroupSize())
	reduce := build(0, ir.SubgroupAdd(ir.LitU32(1)))
	shuffle := build(32, ir.SubgroupShuffle(ir.LitU32(1), ir.LitU32(0)))
	for _, c := range []struct {
		p           *ir.Program
		uses, lanes bool
	}{{plain, false, false}, {builtin, true, false}, {reduce, true, false}, {shuffle, true, true}} {
		uses, lanes := subgroupUse(c.p.Body)
		if uses != c.uses || lanes != c.lanes {
			t.Errorf("subgroupUse(%v) = %v, %v; want %v, %v", c.p.Body, uses, lanes, c.uses, c.lanes)
		}
	}
	r := &runner{profile: pluginapi.DeviceProfile{SubgroupSize: 32, SupportsSubgroupOps: true}}
	if !r.claims(reduce) || r.claims(shuffle) {
		t.Error("a profile with subgroup operations but no shuffles: claims must cover reductions only")
	}
	r.profile.HasSubgroupShuffle = true
	if !r.claims(shuffle) || r.claims(build(16, ir.SubgroupSize())) {
		t.Error("claims must follow the required size")
	}
	r.profile.SupportsSubgroupOps = false
	if r.claims(reduce) {
		t.Error("a profile without subgroup operations claims a reduction")
	}
	if got := r.subgroupSizes(reduce, launch{}); len(got) != 7 || got[0] != 32 {
		t.Errorf("sizes for any size on 64 invocations, adapter 32 first: %v", got)
	}
	if got := r.subgroupSizes(shuffle, launch{}); len(got) != 1 || got[0] != 0 {
		t.Errorf("sizes for a required size: %v", got)
	}
}
