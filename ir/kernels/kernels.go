package kernels

import (
	"embed"
	"math"
	"math/rand/v2"

	"github.com/kiln-dev/kiln/ir"
)

// Kernel is one corpus entry.
type Kernel struct {
	// Name is the short CLI name, e.g. "vector_add".
	Name string
	// OpID is the program name, e.g. "kiln.vector.add.f32".
	OpID string
	// Doc is one line: what the kernel computes and what "size" means.
	Doc string
	// Sizes are the problem sizes worth testing: edge cases (0, 1), sizes that are
	// and are not multiples of the workgroup size, and one large size.
	Sizes []int
	// Program builds the kernel's program; it is validated.
	Program func() *ir.Program
	// NewCase draws random inputs for a problem of this size.
	NewCase func(rng *rand.Rand, size int) Case
	// Reference computes the expected outputs in plain Go, in binding order.
	Reference func(c Case) [][]byte
	// Check compares a backend's outputs with Reference's.
	Check func(got, want [][]byte) error
	// Invocations, when set, is what a case needs on each axis for its size and
	// parameters (c.Spec, else the defaults); the grid is their ceiling
	// division by the workgroup size, whatever that is. It is set for the
	// kernels whose outputs depend neither on the workgroup size nor on the
	// tunables, which a tuner may therefore vary (see Retune), and their cases
	// carry it (Case.Invocations).
	Invocations func(c Case) [3]uint32
	// Flops, when set, counts the floating-point operations of a case, for
	// throughput figures.
	Flops func(c Case) float64
	// Options, when set, are choices that build the kernel's program (element
	// types, tile shapes; see Option), and Build builds the kernel for a value
	// of every option (Configure fills in the defaults); All lists the kernel
	// at the defaults.
	Options []Option
	Build   func(opts ir.SpecMap) (Kernel, error)
}

// Retune returns c set to run with workgroup size wg (zero: the program's) and
// specialization spec, its invocations and grid recomputed; ok is false when k
// has no Invocations, so only its own launch geometry runs.
func (k Kernel) Retune(c Case, wg [3]uint32, spec ir.SpecMap) (Case, bool) {
	if k.Invocations == nil {
		return c, false
	}
	c.WorkgroupSize = wg
	c.Spec = spec
	c.Invocations = k.Invocations(c)
	c.Grid = ir.GridFor(c.Invocations, workgroupSize(c, k.Program().WorkgroupSize))
	return c, true
}

// withInvocations sets c's invocations with inv and its grid for the
// workgroup size def (c's own override wins).
func withInvocations(c Case, inv func(Case) [3]uint32, def [3]uint32) Case {
	c.Invocations = inv(c)
	c.Grid = ir.GridFor(c.Invocations, workgroupSize(c, def))
	return c
}

// Case is one concrete dispatch of a corpus kernel.
type Case struct {
	// Size is the problem size NewCase was asked for.
	Size int
	// Grid is the number of workgroups on each axis.
	Grid [3]uint32
	// Inputs holds, by binding, the data of read and read_write buffers (nil for
	// write buffers).
	Inputs [][]byte
	// OutputCounts holds, by binding, the element count of write buffers without a
	// fixed count (0 for the others).
	OutputCounts []uint32
	// Spec sets the program's parameters; unset ones take their defaults.
	Spec ir.SpecMap
	// WorkgroupSize overrides the program's workgroup size; zero keeps the program's.
	WorkgroupSize [3]uint32
	// Uniforms is the program's uniform block (IR v1.1; see ir.EncodeUniforms),
	// empty for a program without uniforms.
	Uniforms []byte
	// Invocations, when set, is what the case needs on each axis; Grid is their
	// ceiling division by the workgroup size. A launch that lets an autotune
	// record choose the workgroup size passes Invocations (host.Work) rather
	// than Grid, so the grid follows the size the record chose.
	Invocations [3]uint32
}

// All returns the corpus in a fixed order.
func All() []Kernel {
	return []Kernel{
		vectorAdd(),
		saxpy(),
		reduceSum(),
		dot(),
		histogram(),
		exclusiveScan(),
		transpose(),
		matmul(),
		matmulReg(),
		collatz(),
		subgroupSum(),
		scatterAdd(),
		softmax(),
		vectorAddF16(),
		matmulTC(),
	}
}

// Lookup finds a kernel by Name or by OpID.
func Lookup(name string) (Kernel, bool) {
	for _, k := range All() {
		if k.Name == name || k.OpID == name {
			return k, true
		}
	}
	return Kernel{}, false
}

//go:embed json/*.json
var jsonFiles embed.FS

// JSON returns the committed JSON file of the kernel named name (Name or OpID).
func JSON(name string) ([]byte, bool) {
	k, ok := Lookup(name)
	if !ok {
		return nil, false
	}
	data, err := jsonFiles.ReadFile(jsonPath(k.OpID))
	if err != nil {
		return nil, false
	}
	return data, true
}

// jsonPath is where the JSON file of the program opID lives in this package.
func jsonPath(opID string) string { return "json/" + opID + ".json" }

// workgroupSize is the workgroup size c runs with: its override, or def.
func workgroupSize(c Case, def [3]uint32) [3]uint32 {
	if c.WorkgroupSize != ([3]uint32{}) {
		return c.WorkgroupSize
	}
	return def
}

// specU32 is the u32 parameter name as c sets it, or def.
func specU32(c Case, name string, def uint32) uint32 {
	if v, ok := c.Spec.Get(name); ok && v.Kind() == ir.SpecKindU32 {
		return v.Bits()
	}
	return def
}

// specF32 is the f32 parameter name as c sets it, or def.
func specF32(c Case, name string, def float32) float32 {
	if v, ok := c.Spec.Get(name); ok && v.Kind() == ir.SpecKindF32 {
		return math.Float32frombits(v.Bits())
	}
	return def
}

// cover is the number of workgroups of wg invocations that cover n invocations.
func cover(n int, wg uint32) uint32 { return uint32((uint64(n) + uint64(wg) - 1) / uint64(wg)) }
