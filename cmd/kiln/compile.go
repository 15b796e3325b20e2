package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kiln-dev/kiln/cmd/kiln/internal/runs"
	"github.com/kiln-dev/kiln/host"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/kernels"
)

// compileJSON is `kiln compile --json`.
type compileJSON struct {
	Program    string            `json:"program"`
	Backend    string            `json:"backend"`
	Emit       string            `json:"emit"`
	Output     string            `json:"output,omitempty"`
	Bytes      int               `json:"bytes"`
	EntryPoint string            `json:"entry_point,omitempty"`
	Info       map[string]string `json:"info,omitempty"`
	// NoDevice is why the backend cannot dispatch, when it emitted the code
	// without a device (cuda's PTX without the NVIDIA driver).
	NoDevice string `json:"no_device,omitempty"`
}

// compileOptions are kiln compile's flags and its PROGRAM.json argument.
type compileOptions struct {
	*app
	programArg
	Kernel, Backend, Emit, Output, WG string
	Specs                             []string
	Dis                               bool
}

func (a *app) compileCommand() *cobra.Command {
	return command(&compileOptions{app: a}, runCompile, &cobra.Command{
		Use:   "compile [PROGRAM.json]",
		Short: "Emit the device code a backend compiles a program to (SPIR-V, PTX)",
		Long: `Emit the device code a backend compiles a program to, without running it:

  kiln compile prog.json --backend vulkan --emit spirv -o prog.spv
  kiln compile --kernel matmul -o matmul.spv --dis
  kiln compile --kernel saxpy --backend cuda --emit ptx -o saxpy.ptx
  kiln compile --kernel matmul_reg --spec bm=8 --spec bn=8 --wg 16,16 \
      --backend cuda --emit ptx -o matmul_reg.ptx

The backend's plugin compiles the program on its adapter and returns the code
of the kind --emit names (vulkan: spirv; cuda: ptx, cubin); a plugin that
cannot emit code, or not that kind, is an error. A backend with no usable
device is still asked: the cuda plugin emits PTX without the NVIDIA driver
(for sm_80, the "target" it reports; a note on stderr says so), while a cubin
needs the device. --backend defaults to vulkan
and --emit to spirv. --spec NAME=VALUE sets a parameter and --wg X,Y,Z the
workgroup size, as a dispatch would (the code is specialized to them where
the backend folds parameters). -o - writes the code to stdout. --dis prints spirv-dis's
disassembly of SPIR-V (SPIRV-Tools must be installed); with --dis, -o is
optional. The other facts the plugin reports (entry point, specialization
constant ids, ...) are printed, or with --json are its "info".`,
		Args: cobra.MaximumNArgs(1),
	}, func(o *compileOptions, f *pflag.FlagSet) {
		f.StringVar(&o.Kernel, "kernel", "", "corpus kernel to compile (see kiln run --list)")
		f.StringVar(&o.Backend, "backend", "vulkan", "backend id or id:adapter whose code to emit")
		f.StringVar(&o.Emit, "emit", "spirv", "kind of code to emit (vulkan: spirv; cuda: ptx, cubin)")
		f.StringVarP(&o.Output, "output", "o", "", "file to write the code to; - for stdout")
		f.BoolVar(&o.Dis, "dis", false, "print the disassembly of SPIR-V (spirv-dis)")
		f.StringArrayVar(&o.Specs, "spec", nil, "NAME=VALUE: set parameter NAME, or an option of a --kernel (matmul_tc's type=f16) (repeatable)")
		f.StringVar(&o.WG, "wg", "", "X,Y,Z workgroup size to compile for (default: the program's)")
	})
}

// check refuses flags that do not say what to compile and where it goes.
func (o *compileOptions) check() error {
	if (o.Kernel != "") == (o.Program != "") {
		return errors.New("say what to compile. Fix: pass a PROGRAM.json or --kernel NAME (kiln run --list shows the kernels)")
	}
	switch {
	case o.Output == "" && !o.Dis:
		return errors.New("no output. Fix: pass -o FILE (or -o - for stdout), or --dis to print the disassembly")
	case o.Output == "-" && o.Dis:
		return errors.New("-o - and --dis both write to stdout. Fix: write the code to a file with -o FILE, or drop one of them")
	case o.Dis && o.Emit != "spirv":
		return fmt.Errorf("--dis disassembles SPIR-V, not %s. Fix: drop --dis, or pass --emit spirv", o.Emit)
	}
	return nil
}

// runCompile is kiln compile: the backend's code for the program, written to
// -o, disassembled with --dis, and described on stdout.
func runCompile(ctx context.Context, o *compileOptions) error {
	if err := o.check(); err != nil {
		return err
	}
	var args []string
	if o.Program != "" {
		args = []string{o.Program}
	}
	prog, spec, err := compileTarget(o.Kernel, args, o.Specs)
	if err != nil {
		return err
	}
	size, err := runs.ParseWorkgroup(o.WG)
	if err != nil {
		return err
	}
	h, err := o.open(ctx)
	if err != nil {
		return err
	}
	defer h.Close()
	art, err := h.Emit(ctx, o.Backend, prog, host.CompileOptions{Spec: spec, WorkgroupSize: size}, o.Emit)
	if err != nil {
		return err
	}
	if art.Unavailable != "" && !o.json {
		fmt.Fprintf(o.errOut, "kiln: note: %s cannot dispatch, so its plugin emitted the code without a device", art.Backend)
		if t := art.Info["target"]; t != "" {
			fmt.Fprintf(o.errOut, ", for target %s", t)
		}
		fmt.Fprintf(o.errOut, ". Why: %s\n", art.Unavailable)
	}
	code := art.Data
	switch o.Output {
	case "":
	case "-":
		if err := o.writeOut(code); err != nil {
			return err
		}
	default:
		if err := os.WriteFile(o.Output, code, 0o644); err != nil {
			return fmt.Errorf("write %s: %w. Fix: choose a writable -o path", o.Output, err)
		}
	}
	if o.Dis {
		return o.disassemble(code)
	}
	if o.Output == "-" {
		return nil
	}
	j := compileJSON{Program: prog.Name, Backend: art.Backend, Emit: o.Emit, Output: o.Output, Bytes: len(code),
		EntryPoint: art.Info["entry_point"], Info: art.Info, NoDevice: art.Unavailable}
	return o.show(j, func() { o.printCompile(j) })
}

// printCompile says what kiln compile wrote, with the plugin's facts sorted.
func (a *app) printCompile(j compileJSON) {
	fmt.Fprintf(a.out, "wrote %s: %d bytes of %s for %s from %s", j.Output, j.Bytes, j.Emit, j.Program, j.Backend)
	keys := make([]string, 0, len(j.Info))
	for k := range j.Info {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		sep := ", "
		if i == 0 {
			sep = " ("
		}
		fmt.Fprintf(a.out, "%s%s %s", sep, k, j.Info[k])
	}
	if len(keys) > 0 {
		fmt.Fprint(a.out, ")")
	}
	fmt.Fprintln(a.out)
}

// compileTarget returns the program to compile and its specialization: a
// corpus kernel built for the options --spec sets (matmul_tc's type=f16) with
// the other values as its parameters, or a program file with its parameters.
func compileTarget(kernel string, args, specs []string) (*ir.Program, ir.SpecMap, error) {
	if kernel != "" {
		k, ok := kernels.Lookup(kernel)
		if !ok {
			return nil, ir.SpecMap{}, fmt.Errorf("no corpus kernel %q. Fix: pick one of the names `kiln run --list` prints", kernel)
		}
		built, spec, err := runs.ConfigureKernel(k, specs)
		if err != nil {
			return nil, ir.SpecMap{}, err
		}
		return built.Program(), spec, nil
	}
	prog, err := loadProgram(args[0])
	if err != nil {
		return nil, ir.SpecMap{}, err
	}
	spec, err := runs.ParseSpec(prog, specs)
	return prog, spec, err
}

// loadProgram reads and parses the program file path.
func loadProgram(path string) (*ir.Program, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read program %s: %w. Fix: pass the path of a kiln JSON program", path, err)
	}
	p, err := ir.ParseJSON(data)
	if err != nil {
		return nil, fmt.Errorf("program %s: %w", path, err)
	}
	return p, nil
}

// disassemble prints spirv-dis's output for code. spirv-dis writes into a
// buffer, not to stdout, so a reader that goes away early (kiln compile --dis |
// head) cannot make it fail and be taken for a malformed module.
func (a *app) disassemble(code []byte) error {
	tool, err := exec.LookPath("spirv-dis")
	if err != nil {
		return errors.New("spirv-dis is not installed, so --dis cannot disassemble the module. Fix: install SPIRV-Tools (Debian: apt-get install spirv-tools), or leave out --dis")
	}
	var stdout, stderr bytes.Buffer
	c := exec.Command(tool, "--no-color", "-")
	c.Stdin = bytes.NewReader(code)
	c.Stdout = &stdout
	c.Stderr = &stderr
	if err := c.Run(); err != nil {
		return fmt.Errorf("spirv-dis failed: %v: %s. Fix: report it with the program; the module may be malformed", err, bytes.TrimSpace(stderr.Bytes()))
	}
	return a.writeOut(stdout.Bytes())
}

// writeOut writes data to stdout. A reader that closed the pipe (kiln compile
// -o - | head) ends the command quietly: the rest of the output is not wanted.
// On the real stdout the Go runtime raises SIGPIPE first, the status a shell
// pipeline expects; any other writer gets EPIPE, which is not an error here.
func (a *app) writeOut(data []byte) error {
	if _, err := a.out.Write(data); err != nil && !errors.Is(err, syscall.EPIPE) {
		return fmt.Errorf("write to stdout: %w", err)
	}
	return nil
}
