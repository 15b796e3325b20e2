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
	// Tune marks an option kiln tune searches (matmul_tc's tile: tm, tn, tk):
	// its winner is recorded per device and applied by later runs. The other
	// options (type, tf32) are fixed by the user and key the record.
	Tune bool
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

// TunedOptions returns k's options a tuner searches (Option.Tune) at their
// defaults; empty when it has none.
func (k Kernel) TunedOptions() ir.SpecMap {
	var out ir.SpecMap
	for _, o := range k.Options {
		if o.Tune {
			out.Set(o.Name, o.Default)
		}
	}
	return out
}

// FixedOptions returns the value of every option of k that a tuner does not
// search, from opts where it sets one, else the default: what a tuning record
// of k is keyed by, so that `--spec type=bf16` and no --spec name one record.
func (k Kernel) FixedOptions(opts ir.SpecMap) ir.SpecMap {
	var out ir.SpecMap
	for _, o := range k.Options {
		if o.Tune {
			continue
		}
		v, ok := opts.Get(o.Name)
		if !ok {
			v = o.Default
		}
		out.Set(o.Name, v)
	}
	return out
}

// OptionChoice is one combination of the searched options and the kernel it
// builds.
type OptionChoice struct {
	// Options holds one value per searched option (Kernel.TunedOptions).
	Options ir.SpecMap
	// Kernel is the kernel built for them and the fixed options.
	Kernel Kernel
}

// OptionSpace returns the combinations of k's searched options a tuner tries,
// with the fixed options opts sets (the others at their defaults): every
// candidate of each searched option, or only the value opts sets for it. The
// defaults come first. A combination that does not build (a tile over
// ir.MaxMatrixBytes) is left out, and its reason is in skipped.
func (k Kernel) OptionSpace(opts ir.SpecMap) (space []OptionChoice, skipped []error) {
	combos := []ir.SpecMap{{}}
	for _, o := range k.Options {
		if !o.Tune {
			continue
		}
		values := []ir.SpecValue{o.Default}
		if v, set := opts.Get(o.Name); set {
			values = []ir.SpecValue{v}
		} else {
			for _, c := range o.Candidates {
				if c != o.Default {
					values = append(values, c)
				}
			}
		}
		var next []ir.SpecMap
		for _, s := range combos {
			for _, v := range values {
				n := s.Merge(ir.SpecMap{})
				n.Set(o.Name, v)
				next = append(next, n)
			}
		}
		combos = next
	}
	fixed := k.FixedOptions(opts)
	for _, c := range combos {
		built, _, err := k.Configure(fixed.Merge(c))
		if err != nil {
			skipped = append(skipped, err)
			continue
		}
		space = append(space, OptionChoice{Options: c, Kernel: built})
	}
	return space, skipped
}

// ParseTunedOptions reads a tuning record's options ("tk=64 tm=256 tn=128",
// as autotune.FormatParams writes them) back as values of k's searched
// options. A name that is not one of them, a value of the wrong kind, a name
// given twice, or a combination k cannot build with the fixed options opts
// sets is an error: the record is stale or was edited, and is not applied.
func (k Kernel) ParseTunedOptions(opts ir.SpecMap, params string) (ir.SpecMap, error) {
	var out ir.SpecMap
	if params == "" {
		return out, fmt.Errorf("%s: the record holds no options", k.Name)
	}
	for _, kv := range strings.Split(params, " ") {
		name, value, ok := strings.Cut(kv, "=")
		o, known := k.option(name)
		switch {
		case !ok:
			return ir.SpecMap{}, fmt.Errorf("%s: %q is not NAME=VALUE", k.Name, kv)
		case !known || !o.Tune:
			return ir.SpecMap{}, fmt.Errorf("%s has no searched option %q", k.Name, name)
		}
		if _, dup := out.Get(name); dup {
			return ir.SpecMap{}, fmt.Errorf("%s: option %s given twice", k.Name, name)
		}
		v, _, err := k.ParseOption(name, value)
		if err != nil {
			return ir.SpecMap{}, err
		}
		out.Set(name, v)
	}
	if _, _, err := k.Configure(k.FixedOptions(opts).Merge(out)); err != nil {
		return ir.SpecMap{}, err
	}
	return out, nil
}
