package backend

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/pluginapi"
	"github.com/kiln-dev/kiln/plugins/internal/gputest"
	"github.com/kiln-dev/kiln/plugins/vulkan/vk"
)

// TestV12 runs the IR v1.2 checks on the device (lavapipe in `make test`, under
// the validation layer), with buffers mapped and staged: f16 arithmetic, the
// casts, bf16 storage and every matrix statement on the scalar matrix path.
func TestV12(t *testing.T) {
	b := newTestBackend(t)
	bothMemoryPaths(t, b, func(t *testing.T) {
		for _, c := range gputest.V12Checks() {
			t.Run(c.Name, func(t *testing.T) { c.Check(t, b) })
		}
	})
}

// TestV12OverResidentBuffers runs the IR v1.2 checks through AllocBuffer,
// WriteBuffer, Submit and ReadBuffer (2-byte elements bound by byte ranges,
// odd element counts included).
func TestV12OverResidentBuffers(t *testing.T) {
	b := newTestBackend(t)
	bothMemoryPaths(t, b, func(t *testing.T) {
		for _, c := range gputest.V12Checks() {
			t.Run(c.Name, func(t *testing.T) { c.Check(t, overResident{b}) })
		}
	})
}

// TestV12Capabilities pins what the profile reports and that a device without
// f16 arithmetic or 16-bit storage rejects programs that need them at compile,
// with a reason naming the feature.
func TestV12Capabilities(t *testing.T) {
	for _, c := range []struct {
		f        vk.Features
		f16, b16 bool
	}{{vk.Features{}, false, false}, {vk.Features{ShaderFloat16: true}, false, false},
		{vk.Features{StorageBuffer16BitAccess: true}, false, true}, {vk.Features{ShaderFloat16: true, StorageBuffer16BitAccess: true}, true, true}} {
		p := profile(vk.Properties{}, c.f, nil, false)
		if p.SupportsF16 != c.f16 || p.SupportsBF16 != c.b16 || p.SupportsTensorCores {
			t.Errorf("features %+v: profile f16 %v bf16 %v tensor cores %v, want %v %v false", c.f, p.SupportsF16, p.SupportsBF16, p.SupportsTensorCores, c.f16, c.b16)
		}
	}
	full := target(vk.Properties{FloatControls: &vk.FloatControls{SignedZeroInfNanPreserveFloat16: true}},
		vk.Features{ShaderFloat16: true, StorageBuffer16BitAccess: true, ShaderInt16: true})
	if !full.Float16 || !full.Storage16 || !full.Int16 || !full.SignedZeroInfNanPreserve16 {
		t.Errorf("target with every 16-bit feature = %+v", full)
	}
	b := newTestBackend(t)
	a := b.adapters.List()[0]
	// Tensor cores are claimed exactly where the cooperative-matrix path has
	// f16 or bf16 products (coopmat_test.go pins how), never from 16-bit
	// features alone.
	coop := a.target.Coop.F16 || a.target.Coop.BF16
	if prof := a.info.Profile; prof.SupportsF16 != (a.features.ShaderFloat16 && a.features.StorageBuffer16BitAccess) || prof.SupportsTensorCores != coop {
		t.Errorf("adapter profile f16 %v tensor cores %v with features %+v, cooperative products %v", prof.SupportsF16, prof.SupportsTensorCores, a.features, coop)
	}
	f16 := ir.NewBuilder("f16_add", 64, 1, 1)
	f16.Buffer("x", ir.F16, ir.ReadWrite)
	f16.Store("x", ir.GlobalID(0), ir.Add(ir.Load("x", ir.GlobalID(0)), ir.LitF16(1)))
	bf16 := ir.NewBuilder("bf16_copy", 64, 1, 1)
	bf16.Buffer("x", ir.BF16, ir.ReadWrite)
	bf16.Store("x", ir.GlobalID(0), ir.Load("x", ir.Add(ir.GlobalID(0), ir.LitU32(1))))
	own := a.target
	defer func() { a.target = own }()
	for _, c := range []struct {
		p       *ir.Program
		f16, st bool
		want    string
	}{{f16.MustBuild(), false, true, "shaderFloat16"}, {f16.MustBuild(), true, false, "storageBuffer16BitAccess"},
		{bf16.MustBuild(), true, false, "storageBuffer16BitAccess"}} {
		a.target.Float16, a.target.Storage16 = c.f16, c.st
		_, err := b.Compile(context.Background(), &pluginapi.CompileRequest{Program: c.p})
		var rej *pluginapi.RejectedError
		if !errors.As(err, &rej) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "Fix:") {
			t.Errorf("%s without %s: Compile = %v, want a rejection naming it with a Fix", c.p.Name, c.want, err)
		}
	}
}
