package runs

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/kiln-dev/kiln/host"
	"github.com/kiln-dev/kiln/ir"
	"github.com/kiln-dev/kiln/ir/half"
)

// FileArgs are kiln run's arguments for a program file.
type FileArgs struct {
	// Path is the program's JSON file.
	Path string
	// Inputs are NAME=@FILE: buffer NAME's bytes come from FILE (raw
	// little-endian elements: 2 bytes each for f16 and bf16), or NAME=V,V,...:
	// the values, parsed by the buffer's element type (f16 and bf16 values are
	// rounded to nearest even once from their decimal).
	Inputs []string
	// Sizes are NAME=COUNT: the element count of write buffer NAME.
	Sizes []string
	// Spec are NAME=VALUE: parameter NAME's value, parsed by its declared type.
	Spec []string
	// Zero are NAME or NAME=COUNT: read buffer NAME is meant to run on COUNT
	// zero elements (its fixed count, or none, without COUNT) instead of an
	// --input. A read buffer with neither is an error.
	Zero []string
	// Uniforms are NAME=VALUE: uniform NAME's value (IR v1.1), parsed by its
	// declared type; every uniform of the program needs one.
	Uniforms []string
	// Grid, Invocations and WorkgroupSize are "X[,Y[,Z]]" (missing axes are 1);
	// empty means unset. One of Grid and Invocations is needed.
	Grid, Invocations, WorkgroupSize string
	// Backend names the backend; empty means the preferred one.
	Backend string
	// Limits bound the buffers before anything is read or allocated.
	Limits Limits
}

// FileJob reads the program file and builds its launch from the arguments.
func FileJob(a FileArgs) (Job, error) {
	data, err := os.ReadFile(a.Path)
	if err != nil {
		return Job{}, fmt.Errorf("reading program %s: %w. Fix: pass the path of a kiln JSON program", a.Path, err)
	}
	prog, err := ir.ParseJSON(data)
	if err != nil {
		return Job{}, fmt.Errorf("program %s: %w", a.Path, err)
	}
	l := host.Launch{Backend: a.Backend}
	n := len(prog.Buffers)
	l.Inputs = make([][]byte, n)
	l.OutputCounts = make([]uint32, n)
	given := map[string]string{}
	for _, kv := range a.Inputs {
		name, file, err := bufferPair("--input", kv, given)
		if err != nil {
			return Job{}, err
		}
		d, ok := prog.Buffer(name)
		if !ok || !d.Access.Readable() {
			return Job{}, fmt.Errorf("--input %s: the program has no read or read_write buffer %q. Fix: name one of: %s", kv, name, bufferNames(prog, true))
		}
		path, ok := strings.CutPrefix(file, "@")
		if !ok {
			if l.Inputs[d.Binding], err = parseValues(d.Type, file); err != nil {
				return Job{}, fmt.Errorf("--input %s: %w. Fix: write %s=@FILE (raw little-endian %s elements) or comma-separated %s values", kv, err, name, d.Type, d.Type)
			}
			if err := a.Limits.Check("--input "+kv, uint64(len(l.Inputs[d.Binding]))); err != nil {
				return Job{}, err
			}
			continue
		}
		st, err := os.Stat(path)
		if err != nil {
			return Job{}, fmt.Errorf("--input %s: %w. Fix: pass an existing file of raw little-endian elements", kv, err)
		}
		if err := a.Limits.Check("--input "+kv, uint64(st.Size())); err != nil {
			return Job{}, err
		}
		if l.Inputs[d.Binding], err = os.ReadFile(path); err != nil {
			return Job{}, fmt.Errorf("--input %s: %w. Fix: pass an existing file of raw little-endian elements", kv, err)
		}
	}
	if err := zeroInputs(prog, a, l.Inputs); err != nil {
		return Job{}, err
	}
	sized := map[string]string{}
	for _, kv := range a.Sizes {
		name, value, err := bufferPair("--size", kv, sized)
		if err != nil {
			return Job{}, err
		}
		d, ok := prog.Buffer(name)
		if !ok || d.Access != ir.Write {
			return Job{}, fmt.Errorf("--size %s: the program has no write buffer %q. Fix: name one of: %s", kv, name, bufferNames(prog, false))
		}
		count, err := strconv.ParseUint(value, 10, 32)
		if err != nil {
			return Job{}, fmt.Errorf("--size %s: %q is not an element count. Fix: write %s=<count>", kv, value, name)
		}
		if err := a.Limits.Check("--size "+kv, count*uint64(d.Type.Size())); err != nil {
			return Job{}, err
		}
		l.OutputCounts[d.Binding] = uint32(count)
	}
	for _, d := range prog.Buffers {
		if d.Access == ir.Write && d.Count == 0 && !hasName(a.Sizes, d.Name) {
			return Job{}, fmt.Errorf("write buffer %q has no fixed count. Fix: pass --size %s=<elements>", d.Name, d.Name)
		}
	}
	if l.Spec, err = ParseSpec(prog, a.Spec); err != nil {
		return Job{}, err
	}
	if l.Uniforms, err = uniformBlock(prog, a.Uniforms); err != nil {
		return Job{}, err
	}
	if l.Grid, err = triple("--grid", a.Grid); err != nil {
		return Job{}, err
	}
	if l.Invocations, err = triple("--invocations", a.Invocations); err != nil {
		return Job{}, err
	}
	if l.WorkgroupSize, err = triple("--wg", a.WorkgroupSize); err != nil {
		return Job{}, err
	}
	if a.Grid == "" && a.Invocations == "" {
		return Job{}, fmt.Errorf("no grid. Fix: pass --grid X,Y,Z (workgroups) or --invocations X,Y,Z")
	}
	return Job{Program: prog, Launch: l}, nil
}

// zeroInputs applies --zero and checks that every read and read_write buffer
// has its data from exactly one of --input and --zero.
func zeroInputs(prog *ir.Program, a FileArgs, inputs [][]byte) error {
	zeroed := map[string]bool{}
	for _, z := range a.Zero {
		name, count, hasCount := strings.Cut(z, "=")
		d, ok := prog.Buffer(name)
		if !ok || !d.Access.Readable() {
			return fmt.Errorf("--zero %s: the program has no read or read_write buffer %q. Fix: name one of: %s", z, name, bufferNames(prog, true))
		}
		if hasName(a.Inputs, name) {
			return fmt.Errorf("--zero %s: buffer %q also has an --input. Fix: pass one of them", z, name)
		}
		if zeroed[name] {
			return fmt.Errorf("--zero %s: buffer %q is zeroed twice. Fix: pass --zero %s once", z, name, name)
		}
		n := uint64(d.Count)
		if hasCount {
			var err error
			if n, err = strconv.ParseUint(count, 10, 32); err != nil {
				return fmt.Errorf("--zero %s: %q is not an element count. Fix: write --zero %s or --zero %s=<count>", z, count, name, name)
			}
			if d.Count > 0 && n != uint64(d.Count) {
				return fmt.Errorf("--zero %s: buffer %q has a fixed count of %d. Fix: write --zero %s", z, name, d.Count, name)
			}
		}
		size := uint64(d.Type.Size())
		if err := a.Limits.Check("--zero "+z, n*size); err != nil {
			return err
		}
		inputs[d.Binding] = make([]byte, n*size)
		zeroed[name] = true
	}
	for _, d := range prog.Buffers {
		if d.Access.Readable() && !zeroed[d.Name] && !hasName(a.Inputs, d.Name) {
			return fmt.Errorf("%s buffer %q has no --input, so the program would read nothing. Fix: pass --input %s=@FILE, or --zero %s[=COUNT] to mean COUNT zero elements (none without COUNT)", d.Access, d.Name, d.Name, d.Name)
		}
	}
	return nil
}

// ParseSpec parses --spec NAME=VALUE flags: each VALUE by the type prog
// declares for parameter NAME.
func ParseSpec(prog *ir.Program, kvs []string) (ir.SpecMap, error) {
	var spec ir.SpecMap
	for _, kv := range kvs {
		name, value, err := pair("--spec", kv)
		if err != nil {
			return ir.SpecMap{}, err
		}
		v, err := specValue(prog, name, value)
		if err != nil {
			return ir.SpecMap{}, fmt.Errorf("--spec %s: %w", kv, err)
		}
		spec.Set(name, v)
	}
	return spec, nil
}

// ParseWorkgroup parses a --wg flag, "X[,Y[,Z]]" (missing axes are 1; ""
// is the zero size: the program's own).
func ParseWorkgroup(s string) ([3]uint32, error) { return triple("--wg", s) }

// bufferPair splits a flag's BUFFER=VALUE argument kv, refusing a buffer that
// already has one: seen holds the arguments so far by buffer, and gets kv.
func bufferPair(flag, kv string, seen map[string]string) (name, value string, err error) {
	if name, value, err = pair(flag, kv); err != nil {
		return "", "", err
	}
	if first, ok := seen[name]; ok {
		return "", "", fmt.Errorf("%s %s: buffer %q already has %s %s. Fix: pass one %s per buffer", flag, kv, name, flag, first, flag)
	}
	seen[name] = kv
	return name, value, nil
}

func pair(flag, kv string) (name, value string, err error) {
	name, value, ok := strings.Cut(kv, "=")
	if !ok || name == "" {
		return "", "", fmt.Errorf("%s %q: expected NAME=VALUE. Fix: write for example %s x=VALUE", flag, kv, flag)
	}
	return name, value, nil
}

func hasName(kvs []string, name string) bool {
	for _, kv := range kvs {
		if n, _, _ := strings.Cut(kv, "="); n == name {
			return true
		}
	}
	return false
}

func bufferNames(p *ir.Program, readable bool) string {
	var names []string
	for _, d := range p.Buffers {
		if d.Access.Readable() == readable {
			names = append(names, d.Name)
		}
	}
	if len(names) == 0 {
		return "(none)"
	}
	return strings.Join(names, ", ")
}

// triple parses "X[,Y[,Z]]"; missing axes are 1, an empty string is all zero.
func triple(flag, s string) ([3]uint32, error) {
	var out [3]uint32
	if s == "" {
		return out, nil
	}
	parts := strings.Split(s, ",")
	if len(parts) > 3 {
		return out, fmt.Errorf("%s %q has more than 3 axes. Fix: write X,Y,Z", flag, s)
	}
	out = [3]uint32{1, 1, 1}
	for i, p := range parts {
		v, err := strconv.ParseUint(strings.TrimSpace(p), 10, 32)
		if err != nil {
			return out, fmt.Errorf("%s %q: axis %d is not a count. Fix: write X,Y,Z with non-negative integers", flag, s, i)
		}
		out[i] = uint32(v)
	}
	return out, nil
}

// specValue parses value by the declared type of parameter name.
func specValue(p *ir.Program, name, value string) (ir.SpecValue, error) {
	d, ok := p.Param(name)
	if !ok {
		var names []string
		for _, q := range p.Params {
			names = append(names, q.Name)
		}
		return ir.SpecValue{}, fmt.Errorf("the program has no parameter %q. Fix: name one of: %s", name, strings.Join(names, ", "))
	}
	bad := func(err error) (ir.SpecValue, error) {
		return ir.SpecValue{}, fmt.Errorf("%q is not a %s: %v. Fix: give a %s value", value, d.Type, err, d.Type)
	}
	switch d.Type {
	case ir.F32:
		f, err := strconv.ParseFloat(value, 32)
		if err != nil {
			return bad(err)
		}
		return ir.SpecF32(float32(f)), nil
	case ir.I32:
		i, err := strconv.ParseInt(value, 0, 32)
		if err != nil {
			return bad(err)
		}
		return ir.SpecI32(int32(i)), nil
	case ir.U32:
		u, err := strconv.ParseUint(value, 0, 32)
		if err != nil {
			return bad(err)
		}
		return ir.SpecU32(uint32(u)), nil
	case ir.Bool:
		b, err := strconv.ParseBool(value)
		if err != nil {
			return bad(err)
		}
		return ir.SpecBool(b), nil
	}
	return bad(fmt.Errorf("type %s has no command-line form", d.Type))
}

// uniformBlock parses NAME=VALUE pairs by the types of p's uniforms and packs
// them into the uniform block a dispatch carries.
func uniformBlock(p *ir.Program, kvs []string) ([]byte, error) {
	values := make(map[string]ir.Literal, len(kvs))
	for _, kv := range kvs {
		name, value, err := pair("--uniform", kv)
		if err != nil {
			return nil, err
		}
		u, ok := p.Uniform(name)
		if !ok {
			var names []string
			for _, d := range p.Uniforms {
				names = append(names, d.Name)
			}
			if len(names) == 0 {
				names = []string{"(none)"}
			}
			return nil, fmt.Errorf("--uniform %s: the program has no uniform %q. Fix: name one of: %s", kv, name, strings.Join(names, ", "))
		}
		if _, dup := values[name]; dup {
			return nil, fmt.Errorf("--uniform %s: uniform %q is set twice. Fix: pass --uniform %s once", kv, name, name)
		}
		lit, err := ir.ParseLiteral(u.Type, value)
		if err != nil {
			return nil, fmt.Errorf("--uniform %s: %w", kv, err)
		}
		values[name] = lit
	}
	for _, u := range p.Uniforms {
		if _, ok := values[u.Name]; !ok {
			return nil, fmt.Errorf("the program's uniform %q (%s) has no value. Fix: pass --uniform %s=<%s>", u.Name, u.Type, u.Name, u.Type)
		}
	}
	return ir.EncodeUniforms(p, values)
}

// WriteOutputs writes every output buffer to dir/<buffer>.bin and returns the paths.
func WriteOutputs(dir string, p *ir.Program, outputs [][]byte) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating output directory: %w. Fix: choose a writable --out directory", err)
	}
	var paths []string
	for i, b := range p.Outputs() {
		if i >= len(outputs) {
			break
		}
		name := fmt.Sprintf("binding%d", b)
		for _, d := range p.Buffers {
			if d.Binding == b {
				name = d.Name
			}
		}
		path := filepath.Join(dir, name+".bin")
		if err := os.WriteFile(path, outputs[i], 0o644); err != nil {
			return paths, fmt.Errorf("writing %s: %w. Fix: choose a writable --out directory", path, err)
		}
		paths = append(paths, path)
	}
	return paths, nil
}

// parseValues parses comma-separated values of element type t into buffer
// bytes: integers for i32 and u32, true or false for bool, decimals (or
// inf, -inf, nan) for f32, and for f16 and bf16 decimals parsed to float64 and
// rounded once to the type, ties to even (docs/design.md, "IR v1.2 semantics").
func parseValues(t ir.Type, text string) ([]byte, error) {
	var out []byte
	for i, v := range strings.Split(text, ",") {
		v = strings.TrimSpace(v)
		if t.Is16Bit() {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return nil, fmt.Errorf("value %d, %q, is not a number", i, v)
			}
			bits := uint16(half.Float16FromFloat64(f))
			if t == ir.BF16 {
				bits = uint16(half.BFloat16FromFloat64(f))
			}
			out = binary.LittleEndian.AppendUint16(out, bits)
			continue
		}
		lit, err := ir.ParseLiteral(t, v)
		if err != nil {
			return nil, fmt.Errorf("value %d: %w", i, err)
		}
		out = binary.LittleEndian.AppendUint32(out, lit.Bits)
	}
	return out, nil
}
