package wiretest

import (
	"math"
	"slices"
	"strings"

	kilnpb "github.com/kiln-dev/kiln/internal/wire/proto"
	"github.com/kiln-dev/kiln/ir"
)

// EverySpecKind is a specialization map with a value of each kind (an f32
// NaN's payload must survive) and, written out by hand, the entries it travels
// as, in name order.
func EverySpecKind() (ir.SpecMap, []*kilnpb.SpecEntry) {
	var m ir.SpecMap
	m.Set("u", ir.SpecU32(0xFFFFFFFF))
	m.Set("i", ir.SpecI32(-7))
	m.Set("nan", ir.SpecF32(math.Float32frombits(0x7FC00123)))
	m.Set("b", ir.SpecBool(true))
	entries := []*kilnpb.SpecEntry{{Name: "b", Kind: kilnpb.SpecKind_SPEC_KIND_BOOL, Bits: 1}}
	for _, typ := range ir.Types() {
		m.Set("dtype_"+typ.String(), ir.SpecDType(typ))
		entries = append(entries, &kilnpb.SpecEntry{Name: "dtype_" + typ.String(), Kind: kilnpb.SpecKind_SPEC_KIND_DTYPE, Bits: ir.DTypeTag(typ)})
	}
	entries = append(entries,
		&kilnpb.SpecEntry{Name: "i", Kind: kilnpb.SpecKind_SPEC_KIND_I32, Bits: 0xFFFFFFF9},
		&kilnpb.SpecEntry{Name: "nan", Kind: kilnpb.SpecKind_SPEC_KIND_F32, Bits: 0x7FC00123},
		&kilnpb.SpecEntry{Name: "u", Kind: kilnpb.SpecKind_SPEC_KIND_U32, Bits: 0xFFFFFFFF})
	slices.SortFunc(entries, func(a, b *kilnpb.SpecEntry) int { return strings.Compare(a.Name, b.Name) })
	return m, entries
}
