package kernels

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/kiln-dev/kiln/ir"
)

// Option is a choice that picks a kernel's program rather than a parameter's
// value in it: an element type, a matrix precision, a matrix tile's shape (a
// matrix's shape is fixed in its program). `kiln run --kernel K --spec
// NAME=VALUE` sets one as it sets a parameter; Kernel.Configure builds the
// kernel for them.
type Option struct {
	// Name is the key ("type").
	Name string
	// Doc says what the option chooses, in a few words.
	Doc string
	// Default is the value of the kernel as All lists it; its kind (u32, bool,
	// or a dtype) is the option's.
	Default ir.SpecValue
	// Candidates are the values worth trying, the default among them; a tuner
	// may search them. Other values of the kind are accepted where the kernel
	// can build them.
	Candidates []ir.SpecValue
}

// option returns k's option named name.
func (k Kernel) option(name string) (Option, bool) {
	for _, o := range k.Options {
		if o.Name == name {
			return o, true
		}
	}
	return Option{}, false
}

// ParseOption parses value as a value of k's option name: a type name
// ("bf16") for a dtype, true or false, or a u32. ok is false when k has no
// such option (the name may be a parameter of its program).
func (k Kernel) ParseOption(name, value string) (v ir.SpecValue, ok bool, err error) {
	o, ok := k.option(name)
	if !ok {
		return ir.SpecValue{}, false, nil
	}
	switch o.Default.Kind() {
	case ir.SpecKindDType:
		t, known := ir.ParseType(value)
		if !known {
			return ir.SpecValue{}, true, fmt.Errorf("option %s of %s: %q is not a type. Fix: write one of %s", name, k.Name, value, o.candidates())
		}
		return ir.SpecDType(t), true, nil
	case ir.SpecKindBool:
		b, perr := strconv.ParseBool(value)
		if perr != nil {
			return ir.SpecValue{}, true, fmt.Errorf("option %s of %s: %q is not true or false. Fix: write %s=true or %s=false", name, k.Name, value, name, name)
		}
		return ir.SpecBool(b), true, nil
	}
	u, perr := strconv.ParseUint(value, 10, 32)
	if perr != nil {
		return ir.SpecValue{}, true, fmt.Errorf("option %s of %s: %q is not a count. Fix: write one of %s", name, k.Name, value, o.candidates())
	}
	return ir.SpecU32(uint32(u)), true, nil
}

// candidates writes the option's candidates for a message ("f16, bf16, f32").
func (o Option) candidates() string {
	var s []string
	for _, c := range o.Candidates {
		s = append(s, OptionString(c))
	}
	return strings.Join(s, ", ")
}

// OptionString writes an option value as --spec spells it: "bf16", "true",
// "64".
func OptionString(v ir.SpecValue) string {
	if t, ok := v.DType(); ok {
		return t.String()
	}
	l, _ := v.Literal()
	return l.String()
}

// Configure returns k built for the options spec sets (the others keep their
// defaults) and the rest of spec, the values of its program's parameters. A
// kernel without options returns itself and spec. The error names an option
// set to a value of another kind, or a combination the kernel cannot build.
func (k Kernel) Configure(spec ir.SpecMap) (Kernel, ir.SpecMap, error) {
	if len(k.Options) == 0 {
		return k, spec, nil
	}
	var opts, rest ir.SpecMap
	for _, o := range k.Options {
		opts.Set(o.Name, o.Default)
	}
	for _, name := range spec.Names() {
		v, _ := spec.Get(name)
		o, ok := k.option(name)
		if !ok {
			rest.Set(name, v)
			continue
		}
		if v.Kind() != o.Default.Kind() {
			return Kernel{}, ir.SpecMap{}, fmt.Errorf("option %s of %s is a %s, not a %s. Fix: write one of %s",
				name, k.Name, kindName(o.Default.Kind()), kindName(v.Kind()), o.candidates())
		}
		opts.Set(name, v)
	}
	built, err := k.Build(opts)
	if err != nil {
		return Kernel{}, ir.SpecMap{}, err
	}
	return built, rest, nil
}

func kindName(k ir.SpecKind) string {
	switch k {
	case ir.SpecKindDType:
		return "type"
	case ir.SpecKindBool:
		return "bool"
	case ir.SpecKindI32:
		return "i32"
	case ir.SpecKindF32:
		return "f32"
	}
	return "u32"
}

// optU32, optBool and optType read an option that Configure filled in.
func optU32(opts ir.SpecMap, name string) uint32 {
	v, _ := opts.Get(name)
	return v.Bits()
}

func optBool(opts ir.SpecMap, name string) bool {
	v, _ := opts.Get(name)
	return v.Bits() != 0
}

func optType(opts ir.SpecMap, name string) ir.Type {
	v, _ := opts.Get(name)
	t, _ := v.DType()
	return t
}
