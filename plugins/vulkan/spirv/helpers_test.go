package spirv

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/ir"
)

// targetEnv is the environment every module must validate in.
const targetEnv = "vulkan1.1"

// spirvVal returns the path of spirv-val, skipping the test when it is missing
// unless KILN_REQUIRE_VULKAN=1 makes that a failure.
func spirvVal(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("spirv-val")
	if err != nil {
		msg := fmt.Sprintf("spirv-val is not on PATH (%v); install spirv-tools (Debian: apt-get install spirv-tools) to validate emitted modules", err)
		if os.Getenv("KILN_REQUIRE_VULKAN") == "1" {
			t.Fatal(msg + " (KILN_REQUIRE_VULKAN=1 makes this a failure)")
		}
		t.Skip(msg)
	}
	return path
}

// validate runs spirv-val on m and fails the test with its message and the
// disassembly (when spirv-dis is installed) if the module is rejected.
func validate(t *testing.T, val, name string, m *Module) {
	t.Helper()
	file := filepath.Join(t.TempDir(), strings.ReplaceAll(name, "/", "_")+".spv")
	if err := os.WriteFile(file, m.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd := exec.Command(val, "--target-env", targetEnv, file)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		dis := ""
		if d, derr := exec.Command("spirv-dis", file).CombinedOutput(); derr == nil {
			dis = "\n" + string(d)
		}
		t.Errorf("%s: spirv-val --target-env %s: %v\n%s%s", name, targetEnv, err, out.String(), dis)
	}
}

// fullTarget is a device with every subgroup class and float controls, so every
// valid program emits.
var fullTarget = Target{SignedZeroInfNanPreserve: true,
	Subgroups: SubgroupBasic | SubgroupArithmetic | SubgroupBallot | SubgroupShuffle,
	Float16:   true, Storage16: true, Int16: true, SignedZeroInfNanPreserve16: true}

// mustEmit emits p for fullTarget or fails the test.
func mustEmit(t testing.TB, name string, p *ir.Program) *Module {
	t.Helper()
	m, err := EmitFor(p, fullTarget)
	if err != nil {
		t.Fatalf("%s: Emit: %v", name, err)
	}
	return m
}

// inst is one decoded instruction.
type inst struct {
	op   uint32
	args []uint32
}

// decode splits a module into its header's id bound and its instructions, checking
// the framing: magic, version, and word counts that tile the stream exactly.
func decode(t *testing.T, words []uint32) (bound uint32, insts []inst) {
	t.Helper()
	if len(words) < headerSize {
		t.Fatalf("module has %d words, less than a header", len(words))
	}
	if words[0] != magic || words[1] != version13 || words[4] != 0 {
		t.Fatalf("header %#x %#x ... %#x: want magic %#x, version %#x, schema 0", words[0], words[1], words[4], magic, version13)
	}
	for i := headerSize; i < len(words); {
		n := int(words[i] >> 16)
		if n == 0 || i+n > len(words) {
			t.Fatalf("instruction at word %d has word count %d, %d words left", i, n, len(words)-i)
		}
		insts = append(insts, inst{op: words[i] & 0xffff, args: words[i+1 : i+n]})
		i += n
	}
	return words[3], insts
}

// resultIDs maps each result id to its instruction, for the opcodes whose result id
// is the first operand (types) or the second (everything with a result type).
func resultIDs(insts []inst) map[uint32]inst {
	out := map[uint32]inst{}
	for _, in := range insts {
		switch {
		case in.op >= opTypeVoid && in.op <= opTypeFunction, in.op == opLabel, in.op == opExtInstImport:
			out[in.args[0]] = in
		case hasResultType(in.op) && len(in.args) >= 2:
			out[in.args[1]] = in
		}
	}
	return out
}

// hasResultType reports whether op's first two operands are a result type and a
// result id (for the opcodes the emitter writes).
func hasResultType(op uint32) bool {
	switch op {
	case opConstantTrue, opConstantFalse, opConstant, opSpecConstantTrue, opSpecConstantFalse, opSpecConstant,
		opSpecConstantComposite, opFunction, opVariable, opLoad, opAccessChain, opCompositeConstruct, opCompositeExtract, opExtInst, opPhi:
		return true
	}
	return op >= opConvertFToU && op <= opAtomicXor && op != opStore && op != opControlBarrier
}

// decorations returns the decorations of each target id: decoration number -> its
// extra operands.
func decorations(insts []inst) map[uint32]map[uint32][]uint32 {
	out := map[uint32]map[uint32][]uint32{}
	for _, in := range insts {
		if in.op != opDecorate {
			continue
		}
		if out[in.args[0]] == nil {
			out[in.args[0]] = map[uint32][]uint32{}
		}
		out[in.args[0]][in.args[1]] = in.args[2:]
	}
	return out
}

// memberDecorations returns the decorations of member 0 of each struct id.
func memberDecorations(insts []inst) map[uint32]map[uint32][]uint32 {
	out := map[uint32]map[uint32][]uint32{}
	for _, in := range insts {
		if in.op != opMemberDecorate || in.args[1] != 0 {
			continue
		}
		if out[in.args[0]] == nil {
			out[in.args[0]] = map[uint32][]uint32{}
		}
		out[in.args[0]][in.args[2]] = in.args[3:]
	}
	return out
}

// names maps OpName targets to their names.
func names(insts []inst) map[string]uint32 {
	out := map[string]uint32{}
	for _, in := range insts {
		if in.op != opName {
			continue
		}
		var b []byte
		for _, w := range in.args[1:] {
			for k := 0; k < 4; k++ {
				if c := byte(w >> (8 * k)); c != 0 {
					b = append(b, c)
				}
			}
		}
		out[string(b)] = in.args[0]
	}
	return out
}
