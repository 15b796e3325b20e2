package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sort"

	"github.com/spf13/cobra"

	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/kernels"
	"github.com/kiln-dev/kiln/plugins/vulkan/spirv"
)

// compileJSON is `kiln compile --json`.
type compileJSON struct {
	Program           string            `json:"program"`
	Backend           string            `json:"backend"`
	Emit              string            `json:"emit"`
	Output            string            `json:"output,omitempty"`
	Bytes             int               `json:"bytes"`
	EntryPoint        string            `json:"entry_point"`
	PushConstantBytes uint32            `json:"push_constant_bytes"`
	WorkgroupSizeIDs  [3]uint32         `json:"workgroup_size_spec_ids"`
	ParamIDs          map[string]uint32 `json:"param_spec_ids"`
}

func (a *app) compileCommand() *cobra.Command {
	var kernel, backend, emit, output string
	var dis bool
	cmd := &cobra.Command{
		Use:   "compile [PROGRAM.json]",
		Short: "Emit the shader a backend would build for a program (SPIR-V for vulkan)",
		Long: `Emit the device code a backend compiles a program to, without running it:

  kiln compile prog.json --backend vulkan --emit spirv -o prog.spv
  kiln compile --kernel matmul -o matmul.spv --dis

The SPIR-V is what the Vulkan backend builds its pipeline from (SPIR-V 1.3,
entry point main; the workgroup size and the parameters are specialization
constants, so one module serves every --spec and --wg). -o - writes the module
to stdout. --dis prints spirv-dis's disassembly (SPIRV-Tools must be
installed); with --dis, -o is optional. No plugin is started.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if (kernel != "") == (len(args) == 1) {
				return errors.New("say what to compile. Fix: pass a PROGRAM.json or --kernel NAME (kiln run --list shows the kernels)")
			}
			if backend != "vulkan" || emit != "spirv" {
				return fmt.Errorf("--backend %s --emit %s is not available: kiln compile emits SPIR-V for the vulkan backend only. Fix: pass --backend vulkan --emit spirv", backend, emit)
			}
			switch {
			case output == "" && !dis:
				return errors.New("no output. Fix: pass -o FILE (or -o - for stdout), or --dis to print the disassembly")
			case output == "-" && dis:
				return errors.New("-o - and --dis both write to stdout. Fix: write the module to a file with -o FILE, or drop one of them")
			}
			prog, err := loadProgram(kernel, args)
			if err != nil {
				return err
			}
			m, err := spirv.Emit(prog)
			if err != nil {
				return err
			}
			code := m.Bytes()
			switch output {
			case "":
			case "-":
				if _, err := a.out.Write(code); err != nil {
					return err
				}
			default:
				if err := os.WriteFile(output, code, 0o644); err != nil {
					return fmt.Errorf("write %s: %w. Fix: choose a writable -o path", output, err)
				}
			}
			if dis {
				return a.disassemble(code)
			}
			if output == "-" {
				return nil
			}
			j := compileJSON{
				Program: prog.Name, Backend: backend, Emit: emit, Output: output, Bytes: len(code), EntryPoint: m.EntryPoint,
				PushConstantBytes: m.PushConstantBytes, WorkgroupSizeIDs: m.WorkgroupSizeIDs, ParamIDs: m.ParamIDs,
			}
			if a.json {
				return a.printJSON(j)
			}
			fmt.Fprintf(a.out, "wrote %s: %d bytes of SPIR-V for %s (entry point %s, %d bytes of push constants, workgroup size on spec ids %d %d %d",
				output, j.Bytes, j.Program, j.EntryPoint, j.PushConstantBytes, j.WorkgroupSizeIDs[0], j.WorkgroupSizeIDs[1], j.WorkgroupSizeIDs[2])
			names := make([]string, 0, len(m.ParamIDs))
			for name := range m.ParamIDs {
				names = append(names, name)
			}
			sort.Slice(names, func(i, k int) bool { return m.ParamIDs[names[i]] < m.ParamIDs[names[k]] })
			for _, name := range names {
				fmt.Fprintf(a.out, ", %s on %d", name, m.ParamIDs[name])
			}
			fmt.Fprintln(a.out, ")")
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&kernel, "kernel", "", "corpus kernel to compile (see kiln run --list)")
	f.StringVar(&backend, "backend", "vulkan", "backend whose code to emit (vulkan)")
	f.StringVar(&emit, "emit", "spirv", "what to emit (spirv)")
	f.StringVarP(&output, "output", "o", "", "file to write the module to; - for stdout")
	f.BoolVar(&dis, "dis", false, "print the disassembly (spirv-dis)")
	return cmd
}

// loadProgram returns the corpus kernel's program, or the program file's.
func loadProgram(kernel string, args []string) (*ir.Program, error) {
	if kernel != "" {
		k, ok := kernels.Lookup(kernel)
		if !ok {
			return nil, fmt.Errorf("no corpus kernel %q. Fix: pick one of the names `kiln run --list` prints", kernel)
		}
		return k.Program(), nil
	}
	data, err := os.ReadFile(args[0])
	if err != nil {
		return nil, fmt.Errorf("read program %s: %w. Fix: pass the path of a kiln JSON program", args[0], err)
	}
	p, err := ir.ParseJSON(data)
	if err != nil {
		return nil, fmt.Errorf("program %s: %w", args[0], err)
	}
	return p, nil
}

// disassemble prints spirv-dis's output for code.
func (a *app) disassemble(code []byte) error {
	tool, err := exec.LookPath("spirv-dis")
	if err != nil {
		return errors.New("spirv-dis is not installed, so --dis cannot disassemble the module. Fix: install SPIRV-Tools (Debian: apt-get install spirv-tools), or leave out --dis")
	}
	var stderr bytes.Buffer
	c := exec.Command(tool, "--no-color", "-")
	c.Stdin = bytes.NewReader(code)
	c.Stdout = a.out
	c.Stderr = &stderr
	if err := c.Run(); err != nil {
		return fmt.Errorf("spirv-dis failed: %v: %s. Fix: report it with the program; the module may be malformed", err, bytes.TrimSpace(stderr.Bytes()))
	}
	return nil
}
