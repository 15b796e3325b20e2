// Package ir is kiln's portable compute program (IR v1): one kernel run by a grid of
// workgroups, with typed scalars (bool, i32, u32, f32), specialization parameters,
// storage buffers, workgroup-shared arrays and structured statements. Every backend
// compiles the same Program and must give DESIGN.md's exact semantics, which the CPU
// reference interpreter (plugins/cpuref/interp) defines.
//
// A program is built with a Builder, checked by Validate, carried between processes
// in its canonical binary encoding (Encode, Decode; Digest hashes those bytes), and
// read or written by people in the JSON file form (ParseJSON, MarshalJSON).
// Specialization values (SpecValue, SpecMap, SpecCacheKey) key compiled variants.
//
// A saxpy, y = a*x + y:
//
//	b := ir.NewBuilder("example.saxpy.f32", 256, 1, 1)
//	a := b.Param("a", ir.F32, ir.LitF32(2))
//	x := b.Buffer("x", ir.F32, ir.Read)
//	y := b.Buffer("y", ir.F32, ir.ReadWrite)
//	i := b.Let("i", ir.GlobalID(0))
//	b.If(ir.Lt(i, ir.Len(y)), func(then *ir.Block) {
//		then.Store(y, i, ir.Add(ir.Mul(a, ir.Load(x, i)), ir.Load(y, i)))
//	})
//	prog, err := b.Build() // runs Validate
package ir
