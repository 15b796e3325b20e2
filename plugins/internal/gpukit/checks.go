package gpukit

import (
	"fmt"
	"math"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/pluginapi"
)

// ProgramLimits are a device's limits on a program, and how errors name them.
type ProgramLimits struct {
	// Workgroup is the largest workgroup on each axis; WorkgroupName names it
	// ("maximum block dimensions").
	Workgroup     [3]uint32
	WorkgroupName string
	// Invocations is the most invocations in a workgroup; InvocationsText
	// formats it with one %d ("%d threads per block").
	Invocations     uint32
	InvocationsText string
	// SharedBytes is the most shared memory of a workgroup; SharedText formats
	// it with one %d ("%d per block").
	SharedBytes uint32
	SharedText  string
}

// CheckLimits checks a program, with the workgroup override (all zero keeps
// the program's size), against the device's limits and returns the workgroup
// size the pipeline runs with. The program, the specialization map and the
// override passed the SDK's checks (pluginapi.CheckCompile) before the backend
// saw them; only what depends on the device is checked here. Its errors are
// RejectedErrors starting with backend ("cuda").
func CheckLimits(backend string, p *ir.Program, override [3]uint32, lim ProgramLimits) ([3]uint32, error) {
	wg := p.WorkgroupSize
	if override != ([3]uint32{}) {
		wg = override
	}
	for axis, n := range wg {
		if n > lim.Workgroup[axis] {
			return [3]uint32{}, pluginapi.Rejected("%s: program %q: workgroup size %v exceeds the device's %s %v on axis %d. Fix: use a workgroup of at most %d on that axis",
				backend, p.Name, wg, lim.WorkgroupName, lim.Workgroup, axis, lim.Workgroup[axis])
		}
	}
	if n := uint64(wg[0]) * uint64(wg[1]) * uint64(wg[2]); n > uint64(lim.Invocations) {
		return [3]uint32{}, pluginapi.Rejected("%s: program %q: workgroup size %v has %d invocations, more than the device's %s. Fix: use a smaller workgroup",
			backend, p.Name, wg, n, fmt.Sprintf(lim.InvocationsText, lim.Invocations))
	}
	var shared uint64
	for _, s := range p.Shared {
		shared += 4 * uint64(s.Count)
	}
	if shared > uint64(lim.SharedBytes) {
		return [3]uint32{}, pluginapi.Rejected("%s: program %q uses %d bytes of shared memory, more than the device's %s. Fix: use smaller shared arrays",
			backend, p.Name, shared, fmt.Sprintf(lim.SharedText, lim.SharedBytes))
	}
	return wg, nil
}

// Binding is one buffer of a protocol-1 dispatch: its declaration, its element
// count and the input bytes the request gave it.
type Binding struct {
	Decl  ir.BufferDecl
	Count uint32
	Input []byte
}

// Sized returns b; backends' bindings embed a Binding and so have it too.
func (b *Binding) Sized() *Binding { return b }

// ReadsInput reports whether the dispatch uploads the binding's input.
func (b *Binding) ReadsInput() bool { return b.Decl.Access.Readable() && b.Count > 0 }

// Bytes is the size of the binding's elements: Count elements of its type's
// size (2 bytes for f16 and bf16, 4 for the others).
func (b *Binding) Bytes() uint64 { return uint64(b.Count) * uint64(b.Decl.Type.Size()) }

// BindingLimit is the most bytes a device binds in one binding, and how errors
// name it: Text formats the adapter's index and Bytes with %d and %d
// ("adapter %d's %d").
type BindingLimit struct {
	Adapter int
	Bytes   uint64
	Text    string
}

// SizeBindings sizes every binding of a launch that passed the SDK's checks
// (pluginapi.CheckLaunch) and checks each against the device's binding limit;
// wrap makes the backend's binding of each. A write buffer has its fixed count
// or the request's output count, any other buffer its input's elements. Its
// errors are RejectedErrors starting with backend ("cuda").
func SizeBindings[B any](backend string, prog *ir.Program, req *pluginapi.DispatchRequest, lim BindingLimit, wrap func(Binding) B) ([]B, error) {
	binds := make([]B, len(prog.Buffers))
	for i, decl := range prog.Buffers {
		bd := Binding{Decl: decl}
		size := uint64(decl.Type.Size()) // 2 for IR v1.2's f16 and bf16
		if i < len(req.Inputs) {
			bd.Input = req.Inputs[i]
		}
		switch {
		case decl.Access != ir.Write:
			bd.Count = uint32(uint64(len(bd.Input)) / size)
		case decl.Count != 0:
			bd.Count = decl.Count
		case i < len(req.OutputCounts):
			bd.Count = req.OutputCounts[i]
		}
		if bytes := uint64(bd.Count) * size; bytes > lim.Bytes {
			return nil, pluginapi.Rejected("%s: program %q: buffer %q (binding %d) has %d bytes, more than %s. Fix: split the work into buffers of at most %d elements",
				backend, prog.Name, decl.Name, decl.Binding, bytes, fmt.Sprintf(lim.Text, lim.Adapter, lim.Bytes), lim.Bytes/size)
		}
		binds[i] = wrap(bd)
	}
	return binds, nil
}

// CheckGridInvocations rejects a grid that, with workgroup size wg, has more
// than 2^32 invocations on an axis: global_id is a u32. The SDK checks this for
// Dispatch (pluginapi.CheckLaunch); the backends check it for the dispatches of
// a protocol-2 batch, which the SDK checks for their ranges only.
func CheckGridInvocations(backend, program string, grid, wg [3]uint32) error {
	for axis, g := range grid {
		if uint64(g)*uint64(wg[axis]) > math.MaxUint32+1 {
			return pluginapi.Rejected("%s: program %q: grid %v with workgroup size %v gives more than 2^32 invocations on axis %d, beyond a u32 global_id. Fix: use a smaller grid",
				backend, program, grid, wg, axis)
		}
	}
	return nil
}

// UnchangedOutputs is the result of a dispatch that runs nothing: write buffers
// zero-filled, read_write buffers as given.
func UnchangedOutputs[B interface{ Sized() *Binding }](binds []B) [][]byte {
	var outs [][]byte
	for _, b := range binds {
		bd := b.Sized()
		switch bd.Decl.Access {
		case ir.Write:
			outs = append(outs, make([]byte, bd.Bytes()))
		case ir.ReadWrite:
			outs = append(outs, append(make([]byte, 0, len(bd.Input)), bd.Input...))
		}
	}
	return outs
}
