package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/kiln-dev/kiln/ir"
)

// closedPipe returns the write end of a pipe whose reader is already closed, as
// stdout is for `kiln compile --dis | head` once head has read its lines.
func closedPipe(t *testing.T) *os.File {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	t.Cleanup(func() { w.Close() })
	return w
}

// A reader that closes stdout early (kiln compile --dis | head) ends the
// command quietly, with exit status 0: neither the disassembly nor the code of
// -o - is blamed on the module or reported as an error.
func TestCompileToAClosedPipeEndsQuietly(t *testing.T) {
	dir := emitterPlugins(t)
	cases := [][]string{
		{"compile", "--kernel", "matmul_reg", "--backend", "vulkan", "--emit", "spirv", "-o", "-"},
		{"compile", "--kernel", "matmul_reg", "--backend", "cuda", "--emit", "ptx", "-o", "-"},
	}
	if _, err := exec.LookPath("spirv-dis"); err == nil {
		cases = append(cases, []string{"compile", "--kernel", "matmul_reg", "--dis"})
	} else {
		t.Log("spirv-dis is not installed; --dis into a closed pipe was not checked")
	}
	for _, args := range cases {
		var errOut bytes.Buffer
		code := execute(context.Background(), append([]string{"--timeout", "2m", "--plugins", dir}, args...), closedPipe(t), &errOut)
		// The only thing said is the note that the PTX was emitted without a device.
		said := strings.TrimSpace(errOut.String())
		if code != 0 || said != "" && !strings.HasPrefix(said, "kiln: note: cuda:0 cannot dispatch") {
			t.Errorf("%v into a closed pipe: exit %d, stderr %q; want 0 and no error", args, code, said)
		}
	}
}

// The kiln executable in a shell pipeline whose reader is gone: it dies of
// SIGPIPE (the status `| head` expects) or exits 0, and says nothing.
func TestCompileExecutableIntoAClosedPipe(t *testing.T) {
	if _, err := exec.LookPath("spirv-dis"); err != nil {
		t.Skip("spirv-dis is not installed")
	}
	dir := emitterPlugins(t)
	bin := buildKiln(t)
	c := exec.Command(bin, "--plugins", dir, "compile", "--kernel", "matmul_reg", "--dis")
	c.Stdout = closedPipe(t)
	var stderr bytes.Buffer
	c.Stderr = &stderr
	err := c.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		if ws, ok := exit.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGPIPE {
			t.Fatalf("kiln compile --dis into a closed pipe: %v; want exit 0 or SIGPIPE\n%s", err, stderr.String())
		}
	default:
		t.Fatal(err)
	}
	if s := strings.TrimSpace(stderr.String()); s != "" {
		t.Fatalf("kiln compile --dis into a closed pipe said %q; want nothing", s)
	}
}

// checkPTX requires a PTX module with an entry point in file, as j reports it.
func checkPTX(t *testing.T, file string, j compileJSON) string {
	t.Helper()
	text, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(text), ".version") || !strings.Contains(string(text), ".entry") || j.Bytes != len(text) || j.Emit != "ptx" ||
		j.EntryPoint == "" || j.Info["target"] == "" || !strings.Contains(string(text), ".target "+j.Info["target"]) {
		t.Fatalf("ptx of %d bytes, reported %+v:\n%s", len(text), j, text)
	}
	return string(text)
}

// The cuda plugin emits PTX through kiln compile whether or not the machine
// has a CUDA device: the emitter is pure Go. Here with whatever driver the
// machine has (none on a CPU-only machine).
func TestCompileEmitsPTX(t *testing.T) {
	dir := emitterPlugins(t)
	out := filepath.Join(t.TempDir(), "saxpy.ptx")
	var j compileJSON
	kilnJSON(t, &j, "--plugins", dir, "--json", "compile", "--kernel", "saxpy", "--backend", "cuda", "--emit", "ptx", "-o", out)
	checkPTX(t, out, j)
	if j.NoDevice != "" {
		t.Logf("no usable CUDA device, so the PTX was emitted without one: %s", j.NoDevice)
	}
}

// Without a CUDA driver (KILN_CUDA_DRIVER names a library that does not
// exist), kiln compile --emit ptx still gets the PTX from the real cuda plugin,
// written for the plugin's default target, and says on stderr that no device
// was used; a cubin, which needs the driver, is refused with the reason.
func TestCompileEmitsPTXWithoutADriver(t *testing.T) {
	dir := emitterPlugins(t)
	t.Setenv("KILN_CUDA_DRIVER", "libkiln-no-such-cuda.so.1")
	work := t.TempDir()
	out := filepath.Join(work, "matmul_reg.ptx")
	var j compileJSON
	kilnJSON(t, &j, "--plugins", dir, "--json", "compile", "--kernel", "matmul_reg", "--spec", "bm=8", "--spec", "bn=8", "--wg", "16,16",
		"--backend", "cuda", "--emit", "ptx", "-o", out)
	text := checkPTX(t, out, j)
	if j.Backend != "cuda:0" || j.Info["target"] != "sm_80" || j.Info["workgroup_size"] != "16,16,1" ||
		!strings.Contains(j.NoDevice, "libkiln-no-such-cuda.so.1 not found") || !strings.Contains(text, ".reqntid 16, 16, 1") {
		t.Fatalf("compile --emit ptx without a driver reported %+v", j)
	}

	status, stdout, errOut := kiln(t, "--plugins", dir, "compile", "--kernel", "saxpy", "--backend", "cuda", "--emit", "ptx", "-o", "-")
	if status != 0 || !strings.Contains(stdout, ".entry") || !strings.Contains(errOut, "cuda:0 cannot dispatch") || !strings.Contains(errOut, "sm_80") {
		t.Fatalf("compile -o - without a driver: exit %d, stderr %q, %d bytes", status, errOut, len(stdout))
	}
	status, _, errOut = kiln(t, "--plugins", dir, "compile", "--kernel", "saxpy", "--backend", "cuda", "--emit", "cubin", "-o", filepath.Join(work, "saxpy.cubin"))
	if status == 0 || !strings.Contains(errOut, "cuda:0 cannot emit cubin without a device") || !strings.Contains(errOut, "not found") || !strings.Contains(errOut, "Fix:") {
		t.Fatalf("compile --emit cubin without a driver: exit %d, %q; want the driver's absence with a Fix", status, errOut)
	}
}

// TestCompileTargetTakesKernelOptions pins `kiln compile --kernel matmul_tc
// --spec type=f16`: options build the kernel, other values are parameters.
func TestCompileTargetTakesKernelOptions(t *testing.T) {
	p, spec, err := compileTarget("matmul_tc", nil, []string{"type=f16", "tk=16"})
	if err != nil || p.Name != "kiln.matrix.matmul_tc.f16" || spec.Len() != 0 {
		t.Fatalf("matmul_tc type=f16: %v, %v, %v", p, spec.Names(), err)
	}
	p, spec, err = compileTarget("vector_add", nil, []string{"epi=2"})
	if v, _ := spec.Get("epi"); err != nil || p.Name != "kiln.vector.add.f32" || v != ir.SpecU32(2) {
		t.Fatalf("vector_add epi=2: %v, %v, %v", p.Name, spec.Names(), err)
	}
	if _, _, err := compileTarget("matmul_tc", nil, []string{"type=u32"}); err == nil || !strings.Contains(err.Error(), "Fix:") {
		t.Errorf("type=u32: %v", err)
	}
}

// TestRunListShowsKernelOptions pins `kiln run --list --json`: a kernel with
// options lists them with their defaults and candidates, as --spec spells
// them.
func TestRunListShowsKernelOptions(t *testing.T) {
	code, out, errOut := kiln(t, "run", "--list", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rows []struct {
		Name    string `json:"name"`
		Options []struct {
			Name       string   `json:"name"`
			Default    string   `json:"default"`
			Candidates []string `json:"candidates"`
		} `json:"options"`
	}
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, r := range rows {
		if r.Name != "matmul_tc" {
			continue
		}
		if len(r.Options) == 0 || r.Options[0].Name != "type" || r.Options[0].Default != "bf16" || strings.Join(r.Options[0].Candidates, ",") != "bf16,f16,f32" {
			t.Fatalf("matmul_tc's options: %+v", r.Options)
		}
		return
	}
	t.Fatalf("no matmul_tc in %s", out)
}
