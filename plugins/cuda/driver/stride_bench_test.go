package driver

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// gridStridePTX is the vector add c[i] = a[i] + b[i] in the shapes kiln's emitter
// writes for an elements-per-invocation kernel: every thread adds epi elements,
// gid + k·total for k < epi (total the grid's threads), unrolled. Each element
// sits in "if i < len(c)", as the corpus kernel is written, and its loads check
// their own buffer's length as IR semantics require (the lengths are separate
// parameters, as in an emitted kernel). branches picks how the if is written: a
// branch around each element (the emitter's if) or, with false, predicated
// straight-line code. contiguous makes the elements of a thread consecutive
// (epi·gid + k) instead of a grid stride; checked false drops every check (the
// code a perfect bounds analysis would give).
func gridStridePTX(epi int, load string, branches, contiguous, checked bool) string {
	var s strings.Builder
	np, nr, nd := 1, 7, 7
	p := func() string { np++; return fmt.Sprintf("%%p%d", np) }
	r := func() string { nr++; return fmt.Sprintf("%%r%d", nr) }
	rd := func() string { nd++; return fmt.Sprintf("%%rd%d", nd) }
	for k := range epi {
		i := "%r4"
		switch {
		case contiguous:
			i = r()
			fmt.Fprintf(&s, "\tmad.lo.u32 %s, %%r4, %d, %d;\n", i, epi, k)
		case k > 0:
			i = r()
			fmt.Fprintf(&s, "\tmad.lo.u32 %s, %%r7, %d, %%r4;\n", i, k)
		}
		guard := ""
		end := fmt.Sprintf("$E%d", k)
		if checked {
			in := p()
			fmt.Fprintf(&s, "\tsetp.lt.u32 %s, %s, %%r3;\n", in, i)
			if branches {
				fmt.Fprintf(&s, "\t@!%s bra %s;\n", in, end)
			} else {
				guard = "@" + in + " "
			}
		}
		off := rd()
		fmt.Fprintf(&s, "\tmul.wide.u32 %s, %s, 4;\n", off, i)
		var vals [2]string
		for j, buf := range []struct{ base, count string }{{"%rd2", "%r1"}, {"%rd4", "%r2"}} {
			addr, v := rd(), r()
			vals[j] = v
			fmt.Fprintf(&s, "\tadd.s64 %s, %s, %s;\n", addr, buf.base, off)
			if !checked {
				fmt.Fprintf(&s, "\t%s %s, [%s];\n", load, v, addr)
				continue
			}
			ok := p()
			fmt.Fprintf(&s, "\tsetp.lt.u32 %s, %s, %s;\n", ok, i, buf.count)
			if !branches {
				fmt.Fprintf(&s, "\tand.pred %s, %s, %s;\n", ok, ok, guard[1:len(guard)-1])
			}
			fmt.Fprintf(&s, "\tmov.b32 %s, 0;\n\t@%s %s %s, [%s];\n", v, ok, load, v, addr)
		}
		sum, addr := r(), rd()
		fmt.Fprintf(&s, "\tadd.rn.f32 %s, %s, %s;\n\tadd.s64 %s, %%rd6, %s;\n\t%sst.global.b32 [%s], %s;\n", sum, vals[0], vals[1], addr, off, guard, addr, sum)
		if checked && branches {
			fmt.Fprintf(&s, "%s:\n", end)
		}
	}
	return fmt.Sprintf(`.version 7.4
.target sm_80
.address_size 64
.visible .entry vadd(.param .u64 a, .param .u64 b, .param .u64 c, .param .u32 na, .param .u32 nb, .param .u32 nc)
.reqntid 256, 1, 1
{
	.reg .pred %%p<%d>;
	.reg .b32 %%r<%d>;
	.reg .b64 %%rd<%d>;
	ld.param.u64 %%rd1, [a];
	cvta.to.global.u64 %%rd2, %%rd1;
	ld.param.u64 %%rd3, [b];
	cvta.to.global.u64 %%rd4, %%rd3;
	ld.param.u64 %%rd5, [c];
	cvta.to.global.u64 %%rd6, %%rd5;
	ld.param.u32 %%r1, [na];
	ld.param.u32 %%r2, [nb];
	ld.param.u32 %%r3, [nc];
	mov.u32 %%r5, %%ctaid.x;
	mov.u32 %%r6, %%tid.x;
	mad.lo.u32 %%r4, %%r5, 256, %%r6;
	mov.u32 %%r7, %%nctaid.x;
	shl.b32 %%r7, %%r7, 8;
%s	ret;
}
`, np+1, nr+1, nd+1, s.String())
}

// BenchmarkGridStride times 256 Mi-element f32 vector adds (12 bytes per
// element) written as gridStridePTX writes them, for the emitter's choices: one
// element per thread as today, 4 and 8 per thread unrolled with a branch per
// element (the emitter's if) or predicated, with the non-coherent load path, with
// consecutive elements per thread, and without checks.
func BenchmarkGridStride(b *testing.B) {
	c := gpuContextB(b)
	const n = 1 << 28
	type variant struct {
		name                            string
		epi                             int
		load                            string
		branches, contiguous, unchecked bool
	}
	var variants []variant
	for _, epi := range []int{1, 2, 4, 8} {
		variants = append(variants,
			variant{fmt.Sprintf("epi%d_branch", epi), epi, "ld.global.b32", true, false, false},
			variant{fmt.Sprintf("epi%d_pred", epi), epi, "ld.global.b32", false, false, false})
	}
	variants = append(variants,
		variant{"epi4_pred_nc", 4, "ld.global.nc.b32", false, false, false},
		variant{"epi8_pred_nc", 8, "ld.global.nc.b32", false, false, false},
		variant{"epi4_unchecked", 4, "ld.global.b32", false, false, true},
		variant{"epi8_unchecked", 8, "ld.global.b32", false, false, true},
		variant{"epi4_contiguous_pred", 4, "ld.global.b32", false, true, false})
	for _, v := range variants {
		b.Run(v.name, func(b *testing.B) {
			text := gridStridePTX(v.epi, v.load, v.branches, v.contiguous, !v.unchecked)
			best, err := timeVectorAdd(b, c, text, n, 6, [3]uint32{uint32(n / (256 * v.epi)), 1, 1})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(12*n/float64(best)/1e6, "best-GB/s")
		})
	}
}

// timeVectorAdd loads a vadd kernel from text and runs it b.N+1 times over three
// buffers of n f32 (its first three parameters; with six, the next three are the
// counts), returning the fastest run after the first in milliseconds.
func timeVectorAdd(b *testing.B, c *Context, text string, n uint64, params int, grid [3]uint32) (float32, error) {
	var best float32
	err := c.Do(func() error {
		r, err := loadVectorAdd(c, text, n, params, true)
		if err != nil {
			return err
		}
		defer r.release()
		for i := 3; i < params; i++ {
			r.p.Set(i, n)
		}
		b.ResetTimer()
		for run := range b.N + 1 {
			c.EventRecord(r.start, r.s)
			if err := c.Launch(r.f, grid, [3]uint32{256, 1, 1}, 0, r.s, r.p); err != nil {
				return err
			}
			c.EventRecord(r.end, r.s)
			if err := c.EventSynchronize(r.end); err != nil {
				return err
			}
			ms, err := c.EventElapsed(r.start, r.end)
			if err != nil {
				return err
			}
			if run > 0 && (best == 0 || ms < best) {
				best = ms
			}
		}
		return nil
	})
	return best, err
}

// vectorAddRig is a vadd kernel loaded for a benchmark: its function, a stream,
// its parameters (the first three n-element buffers) and two events.
type vectorAddRig struct {
	f          Function
	s          Stream
	p          *Params
	start, end Event
	undo       []func()
}

// release frees what loadVectorAdd made, last made first.
func (r *vectorAddRig) release() {
	for i := len(r.undo) - 1; i >= 0; i-- {
		r.undo[i]()
	}
}

// loadVectorAdd links text, loads its entry "vadd", and creates a stream,
// params parameters of which the first three are buffers of n f32 (set to 1.0
// when fill), and two timing events; it runs in c.Do. On an error what was made
// is freed.
func loadVectorAdd(c *Context, text string, n uint64, params int, fill bool) (_ *vectorAddRig, err error) {
	r := &vectorAddRig{}
	defer func() {
		if err != nil {
			r.release()
		}
	}()
	cubin, err := c.Link(text)
	if err != nil {
		return nil, err
	}
	m, err := c.ModuleLoadData(cubin)
	if err != nil {
		return nil, err
	}
	r.undo = append(r.undo, func() { c.ModuleUnload(m) })
	if r.f, err = c.ModuleFunction(m, "vadd"); err != nil {
		return nil, err
	}
	if r.s, err = c.StreamCreate(); err != nil {
		return nil, err
	}
	r.undo = append(r.undo, func() { c.StreamDestroy(r.s) })
	r.p = NewParams(params)
	r.undo = append(r.undo, r.p.Free)
	for i := range 3 {
		buf, err := c.MemAlloc(4 * n)
		if err != nil {
			return nil, err
		}
		r.undo = append(r.undo, func() { c.MemFree(buf) })
		if fill {
			if err := c.MemsetD32Async(buf, 0x3F800000, n, r.s); err != nil {
				return nil, err
			}
		}
		r.p.Set(i, uint64(buf))
	}
	r.start, _ = c.EventCreate()
	r.end, _ = c.EventCreate()
	r.undo = append(r.undo, func() { c.EventDestroy(r.start) }, func() { c.EventDestroy(r.end) })
	return r, nil
}

// TestGridStridePTX checks the benchmark's kernels: one store per element, the
// checks where asked, and, with a device, that the driver's JIT takes each.
func TestGridStridePTX(t *testing.T) {
	type form struct{ branches, contiguous, checked bool }
	forms := []form{{true, false, true}, {false, false, true}, {false, true, true}, {false, false, false}}
	for _, epi := range []int{1, 4, 8} {
		for _, f := range forms {
			text := gridStridePTX(epi, "ld.global.nc.b32", f.branches, f.contiguous, f.checked)
			stores := strings.Count(text, "st.global.b32")
			branches := strings.Count(text, " bra ")
			guarded := strings.Count(text, "@%p")
			wantBranches, wantGuarded := 0, 0
			if f.checked {
				wantGuarded = 2 * epi
				if f.branches {
					wantBranches = epi
				} else {
					wantGuarded += epi
				}
			}
			if stores != epi || branches != wantBranches || guarded != wantGuarded {
				t.Errorf("epi %d %+v: %d stores, %d branches, %d guarded; want %d, %d, %d\n%s", epi, f, stores, branches, guarded, epi, wantBranches, wantGuarded, text)
			}
		}
	}
	if os.Getenv("KILN_REQUIRE_CUDA") != "1" {
		if _, err := Load(""); err != nil {
			return
		}
	}
	c := gpuContext(t)
	for _, f := range forms {
		err := c.Do(func() error {
			_, err := c.Link(gridStridePTX(8, "ld.global.nc.b32", f.branches, f.contiguous, f.checked))
			return err
		})
		if err != nil {
			t.Errorf("%+v: %v", f, err)
		}
	}
}
