package autotune

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/kiln-dev/kiln/ir"
)

// FormatParams writes the scalar values of spec as a record's params: NAME=VALUE
// pairs sorted by name and separated by one space ("bm=8 bn=4 tk=16"), each
// value as ir.Literal.String writes it. Element-type values are left out.
func FormatParams(spec ir.SpecMap) string {
	var parts []string
	for _, name := range spec.Names() {
		v, _ := spec.Get(name)
		if l, ok := v.Literal(); ok {
			parts = append(parts, name+"="+l.String())
		}
	}
	return strings.Join(parts, " ")
}

// ParseParams reads a record's params back as a SpecMap, each value parsed by
// the type of p's parameter of that name. A name p does not declare, or a value
// that is not of its type, is an error.
func ParseParams(p *ir.Program, params string) (ir.SpecMap, error) {
	var spec ir.SpecMap
	if err := checkParams(params); err != nil {
		return spec, err
	}
	if params == "" {
		return spec, nil
	}
	for _, kv := range strings.Split(params, " ") {
		name, value, _ := strings.Cut(kv, "=")
		d, ok := p.Param(name)
		if !ok {
			return spec, fmt.Errorf("program %s has no parameter %q", p.Name, name)
		}
		v, err := parseValue(d.Type, value)
		if err != nil {
			return spec, fmt.Errorf("parameter %s: %q is not a %s", name, value, d.Type)
		}
		spec.Set(name, v)
	}
	return spec, nil
}

func parseValue(t ir.Type, s string) (ir.SpecValue, error) {
	switch t {
	case ir.F32:
		f, err := strconv.ParseFloat(s, 32)
		return ir.SpecF32(float32(f)), err
	case ir.I32:
		i, err := strconv.ParseInt(s, 10, 32)
		return ir.SpecI32(int32(i)), err
	case ir.U32:
		u, err := strconv.ParseUint(s, 10, 32)
		return ir.SpecU32(uint32(u)), err
	case ir.Bool:
		b, err := strconv.ParseBool(s)
		return ir.SpecBool(b), err
	}
	return ir.SpecValue{}, fmt.Errorf("type %s", t)
}

// checkParams checks the shape FormatParams writes: empty, or NAME=VALUE pairs
// separated by single spaces, names identifiers in ascending order, values
// non-empty without spaces or '='.
func checkParams(params string) error {
	if params == "" {
		return nil
	}
	prev := ""
	for i, kv := range strings.Split(params, " ") {
		name, value, ok := strings.Cut(kv, "=")
		switch {
		case !ok || value == "" || strings.Contains(value, "="):
			return fmt.Errorf("params pair %d %q is not NAME=VALUE", i+1, kv)
		case !isIdent(name):
			return fmt.Errorf("params name %q is not an identifier", name)
		case i > 0 && name <= prev:
			return fmt.Errorf("params names must be distinct and sorted; %q follows %q", name, prev)
		}
		prev = name
	}
	return nil
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || i > 0 && '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}
