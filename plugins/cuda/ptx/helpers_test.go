package ptx

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/kernels"
	"github.com/kiln-dev/kiln/pluginapi/conformance/kit"
	"github.com/kiln-dev/kiln/plugins/cuda/internal/edgetest"
)

// requireEnv set to 1 turns a missing ptxas (or GPU) from a skip into a failure.
const requireEnv = "KILN_REQUIRE_CUDA"

// ptxasArch is the architecture every module is assembled for in the tests: the
// H200's, the newest that kiln is measured on.
const ptxasArch = "sm_90"

// tool returns the path of a CUDA toolkit program (ptxas, cuobjdump), from
// KILN_CUDA_TOOLS (a folder) or PATH, skipping the test when it is missing unless
// KILN_REQUIRE_CUDA=1 makes that a failure.
func tool(t testing.TB, name string) string {
	t.Helper()
	if dir := os.Getenv("KILN_CUDA_TOOLS"); dir != "" {
		if path := filepath.Join(dir, name); fileExists(path) {
			return path
		}
	}
	path, err := exec.LookPath(name)
	if err != nil {
		msg := fmt.Sprintf("%s is not on PATH (%v); install the CUDA toolkit (Debian non-free: nvidia-cuda-toolkit) or point KILN_CUDA_TOOLS at a folder holding it, to assemble the emitted PTX", name, err)
		if os.Getenv(requireEnv) == "1" {
			t.Fatal(msg + " (" + requireEnv + "=1 makes this a failure)")
		}
		t.Skip(msg)
	}
	return path
}

func fileExists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir()
}

// keepEnv names a folder where assemble keeps the modules and cubins it makes,
// for a look at them (the GPU experiment runs the device's ptxas over them again).
const keepEnv = "KILN_PTX_OUT"

// assemble runs ptxas on m for arch and returns the cubin's path, failing the test
// with ptxas's message and the module when it is rejected.
func assemble(t testing.TB, ptxas, name string, m *Module, arch string) string {
	t.Helper()
	dir := os.Getenv(keepEnv)
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(dir, strings.NewReplacer("/", "_", " ", "_").Replace(name)+"."+m.Target.String()+"."+arch)
	if err := os.WriteFile(base+".ptx", []byte(m.Text), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd := exec.Command(ptxas, "-arch="+arch, base+".ptx", "-o", base+".cubin")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: ptxas -arch=%s: %v\n%s\n%s", name, arch, err, out.String(), numbered(m.Text))
	}
	return base + ".cubin"
}

// numbered prefixes every line of text with its number, for messages.
func numbered(text string) string {
	var b strings.Builder
	for i, line := range strings.Split(text, "\n") {
		fmt.Fprintf(&b, "%4d  %s\n", i+1, line)
	}
	return b.String()
}

// mustEmit emits p or fails the test.
func mustEmit(t testing.TB, name string, p *ir.Program, opts Options) *Module {
	t.Helper()
	m, err := Emit(p, opts)
	if err != nil {
		t.Fatalf("%s: Emit: %v", name, err)
	}
	return m
}

// namedProgram is a program with the launch options it is emitted for.
type namedProgram struct {
	name string
	prog *ir.Program
	opts Options
}

// allPrograms is every corpus kernel, every edge-table program (the IR v1.2
// rows, matrix scripts included), every program of the conformance kit's
// semantics tables that the emitter takes (it rejects subgroup sizes beyond a
// warp, which the kit then skips) and the simplification tests' programs, each
// with the specialization and workgroup size of its launch.
func allPrograms() []namedProgram {
	var out []namedProgram
	for _, k := range kernels.All() {
		out = append(out, namedProgram{k.Name, k.Program(), Options{}})
	}
	for _, c := range edgetest.Table() {
		out = append(out, namedProgram{"edge." + c.Name, c.Prog, Options{Spec: c.Launch.Spec, WorkgroupSize: c.Launch.WorkgroupSize}})
	}
	for _, p := range kit.SemanticPrograms() {
		opts := Options{Spec: p.Spec, WorkgroupSize: p.WorkgroupSize}
		if _, err := Emit(p.Program, opts); err == nil {
			out = append(out, namedProgram{"kit." + p.Name, p.Program, opts})
		}
	}
	return append(out, optPrograms()...)
}
