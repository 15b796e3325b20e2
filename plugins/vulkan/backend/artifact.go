package backend

import (
	"context"
	"fmt"
	"strconv"

	"github.com/kiln-dev/kiln/pluginapi"
	"github.com/kiln-dev/kiln/plugins/vulkan/spirv"
)

var _ pluginapi.Artifacts = (*Backend)(nil)

// ArtifactSPIRV is the one artifact kind the Vulkan backend emits.
const ArtifactSPIRV = "spirv"

// Artifact returns the SPIR-V module (kind "spirv") that Compile builds the
// program's pipeline from on the adapter. Its Info holds "entry_point",
// "push_constant_bytes" and "workgroup_size" (the effective size, the module's
// LocalSize). The module has the Spec folded in (its values, else the
// parameters' defaults, are constants of the module, as Compile builds it), so
// it differs per Spec as it does per WorkgroupSize.
func (b *Backend) Artifact(ctx context.Context, req *pluginapi.ArtifactRequest) (*pluginapi.Artifact, error) {
	b.life.RLock()
	defer b.life.RUnlock()
	if req == nil || req.Program == nil {
		return nil, pluginapi.Rejected("vulkan: artifact request without a program. Fix: set ArtifactRequest.Program")
	}
	if req.Kind != ArtifactSPIRV {
		return nil, pluginapi.Rejected("vulkan emits %s, not %q. Fix: ask for %s", ArtifactSPIRV, req.Kind, ArtifactSPIRV)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("vulkan: artifact of %q: %w", req.Program.Name, err)
	}
	a, err := b.adapterAt(req.Adapter)
	if err != nil {
		return nil, err
	}
	m, wg, err := a.emit(req.Program, req.Spec, req.WorkgroupSize)
	if err != nil {
		return nil, err
	}
	return &pluginapi.Artifact{Data: m.Bytes(), Info: moduleInfo(m, wg)}, nil
}

// moduleInfo describes m, built for workgroup size wg, as Artifact's Info: with
// matrices, matrix_path says which path they took (spirv.MatrixPathCooperative
// or spirv.MatrixPathScalar; the module's OpSourceExtension says why).
func moduleInfo(m *spirv.Module, wg [3]uint32) map[string]string {
	info := map[string]string{
		"entry_point":         m.EntryPoint,
		"push_constant_bytes": strconv.FormatUint(uint64(m.PushConstantBytes), 10),
		"workgroup_size":      fmt.Sprintf("%d,%d,%d", wg[0], wg[1], wg[2]),
	}
	if m.MatrixPath != "" {
		info["matrix_path"] = m.MatrixPath
	}
	return info
}
