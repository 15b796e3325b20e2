package backend

import (
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/kernels"
	"github.com/kiln-dev/kiln/pluginapi"
	"github.com/kiln-dev/kiln/plugins/vulkan/spirv"
)

func TestCompileArtifactIsTheModuleCompileBuilds(t *testing.T) {
	b := newTestBackend(t)
	ctx := context.Background()
	k, _ := kernels.Lookup("saxpy")
	p := k.Program()
	art, err := b.Artifact(ctx, &pluginapi.ArtifactRequest{Program: p, Kind: ArtifactSPIRV})
	if err != nil {
		t.Fatal(err)
	}
	a, err := b.adapterAt(0)
	if err != nil {
		t.Fatal(err)
	}
	m, err := spirv.EmitFor(p, a.targetFor(p.WorkgroupSize, ir.SpecMap{}))
	if err != nil {
		t.Fatal(err)
	}
	if string(art.Data) != string(m.Bytes()) || binary.LittleEndian.Uint32(art.Data) != 0x07230203 {
		t.Fatalf("artifact of %d bytes differs from the %d-byte module Compile emits", len(art.Data), len(m.Bytes()))
	}
	want := map[string]string{"entry_point": "main", "push_constant_bytes": "32"} // 2 counts and the 6 grid words
	for key, v := range want {
		if art.Info[key] != v {
			t.Errorf("Info[%q] = %q, want %q (Info %v)", key, art.Info[key], v, art.Info)
		}
	}
	for _, key := range []string{"workgroup_size"} {
		if _, ok := art.Info[key]; !ok {
			t.Errorf("Info lacks %q: %v", key, art.Info)
		}
	}
	art, err = b.Artifact(ctx, &pluginapi.ArtifactRequest{Program: p, Kind: ArtifactSPIRV, WorkgroupSize: [3]uint32{32, 1, 1}})
	if err != nil || art.Info["workgroup_size"] != "32,1,1" {
		t.Fatalf("with workgroup size 32: Info %v, %v", art.Info, err)
	}
}

// TestCompileArtifactFoldsTheSpec: the module has the specialization folded in
// (no specialization constants; another value gives another module), as
// Compile builds it.
func TestCompileArtifactFoldsTheSpec(t *testing.T) {
	b := newTestBackend(t)
	k, _ := kernels.Lookup("collatz")
	module := func(spec ir.SpecMap) []byte {
		art, err := b.Artifact(context.Background(), &pluginapi.ArtifactRequest{Program: k.Program(), Kind: ArtifactSPIRV, Spec: spec})
		if err != nil {
			t.Fatal(err)
		}
		words := art.Data[20:]
		for i := 0; i+4 <= len(words); {
			w := binary.LittleEndian.Uint32(words[i:])
			if op := w & 0xffff; op >= 48 && op <= 52 {
				t.Fatalf("the module has a specialization constant (opcode %d)", op)
			}
			i += 4 * int(w>>16)
			if w>>16 == 0 {
				t.Fatal("malformed module: an instruction of 0 words")
			}
		}
		return art.Data
	}
	var other ir.SpecMap
	other.Set("max_steps", ir.SpecU32(7))
	if string(module(ir.SpecMap{})) == string(module(other)) {
		t.Fatal("max_steps=7 gives the same module as the default")
	}
}

func TestCompileArtifactRejectsOtherKinds(t *testing.T) {
	b := newTestBackend(t)
	k, _ := kernels.Lookup("saxpy")
	for _, req := range []*pluginapi.ArtifactRequest{
		{Program: k.Program(), Kind: "ptx"},
		{Program: k.Program()},
		{Kind: ArtifactSPIRV},
	} {
		_, err := b.Artifact(context.Background(), req)
		var rejected *pluginapi.RejectedError
		if !errors.As(err, &rejected) || !strings.Contains(err.Error(), "Fix:") {
			t.Errorf("Artifact(kind %q) = %v, want a RejectedError with a Fix", req.Kind, err)
		}
	}
}
