package backend

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"

	"github.com/kiln-dev/kiln/pluginapi"
	"github.com/kiln-dev/kiln/plugins/vulkan/spirv"
	"github.com/kiln-dev/kiln/plugins/vulkan/vk"
)

// The loop guard (see docs/design.md, "Vulkan", and spirv's loopguard.go):
// Mesa's llvmpipe (lavapipe) ends every loop of a shader once the shader's
// loops have run llvmpipeLoopLimit iterations in all, without an error, so a
// program that loops longer would return wrong values with success. On that
// driver every module is emitted with spirv.Target.LoopGuard: a job with a
// guarded dispatch binds a zeroed scratch word after the program's buffers,
// the module sets it where a loop ended other than as the program says, and
// the job fails with a RejectedError when it is set after the fence.

// llvmpipeLoopLimit is llvmpipe's loop limiter, LP_MAX_TGSI_LOOP_ITERATIONS
// (Mesa, src/gallium/auxiliary/gallivm/lp_bld_limits.h).
const llvmpipeLoopLimit = 65535

// endsLongLoops reports whether the device's driver ends long loops by itself:
// llvmpipe.
func endsLongLoops(p vk.Properties) bool {
	return p.Driver != nil && p.Driver.Name == "llvmpipe"
}

// setBindings is the number of storage bindings of the pipeline's descriptor
// set: the program's buffers, and the loop guard's when the module has it.
func (p *pipeline) setBindings() uint32 {
	n := uint32(len(p.prog.Buffers))
	if p.guard {
		n++
	}
	return n
}

// guardFor gives a dispatch op of a guarded pipeline the job's guard span,
// taking and zeroing it on the first such op: on the host when the span is
// mapped, else by a fill op before the dispatch and with a staging span that
// guardReadBack copies it to.
func (j *job) guardFor(o *op) error {
	if !o.p.guard {
		return nil
	}
	if j.guard.size == 0 {
		d := j.d
		s, err := d.heapFor().alloc(spirv.GuardBytes)
		if err != nil {
			return d.fail("allocating the loop guard", err)
		}
		j.scratch = append(j.scratch, s)
		j.guard, j.guardHost = s, s
		if s.isMapped() {
			clear(s.bytes())
			if err := s.flush(); err != nil {
				return d.fail("zeroing the loop guard", err)
			}
		} else {
			if j.guardHost, err = d.staging.alloc(spirv.GuardBytes); err != nil {
				return d.fail("allocating staging memory", err)
			}
			j.scratch = append(j.scratch, j.guardHost)
			j.ops = append(j.ops, op{kind: opFill, dst: s})
		}
	}
	o.guard = j.guard
	return nil
}

// guardReadBack adds, after the job's last op, the copy of a guard span the
// host cannot read to its staging span.
func (j *job) guardReadBack() {
	if j.guardHost != j.guard {
		j.ops = append(j.ops, op{kind: opCopy, src: j.guard, dst: j.guardHost})
	}
}

// checkGuard, once the job's fence has signalled, reports a set loop-guard
// flag: a loop of one of the job's guarded programs was ended by the driver,
// so the outputs are wrong.
func (j *job) checkGuard(what string) error {
	if j.guard.size == 0 {
		return nil
	}
	d := j.d
	if err := j.guardHost.invalidate(); err != nil {
		return d.fail("reading the loop guard", err)
	}
	if binary.LittleEndian.Uint32(j.guardHost.bytes()) == 0 {
		return nil
	}
	var names []string
	for _, p := range j.pipelines {
		if name := fmt.Sprintf("%q", p.prog.Name); p.guard && !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	return pluginapi.Rejected("vulkan: %s: adapter %d (%s) ended a loop of program %s before the program did: its driver stops a shader's loops after %d iterations in all (Mesa's llvmpipe loop limiter, LP_MAX_TGSI_LOOP_ITERATIONS), so the outputs are wrong. Fix: run the program on another backend (a GPU's Vulkan driver, cuda, or --backend cpu-ref), or split its work so that no invocation loops more than %d times in all",
		what, d.a.index, d.a.info.Name, strings.Join(names, ", "), llvmpipeLoopLimit, llvmpipeLoopLimit)
}
