package ir

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/kiln-dev/kiln/ir/half"
)

// The JSON form of IR v1.2: f16 and bf16 literals, the "matrices" declarations and
// the matrix statements. See docs/design.md, "IR v1.2: spellings and validation".

// The default quiet NaNs of the 16-bit types, written "nan"; any other NaN is
// written as its bits, "0x7e01".
const (
	defaultNaNF16  = 0x7e00
	defaultNaNBF16 = 0x7fc0
)

func defaultNaN16(t Type) uint16 {
	if t == F16 {
		return defaultNaNF16
	}
	return defaultNaNBF16
}

// round16 rounds x to t (F16 or BF16), ties to even.
func round16(t Type, x float64) uint16 {
	if t == F16 {
		return uint16(half.Float16FromFloat64(x))
	}
	return uint16(half.BFloat16FromFloat64(x))
}

// value16 returns the value of the t (F16 or BF16) bits b, exactly.
func value16(t Type, b uint16) float64 {
	if t == F16 {
		return half.Float16(b).Float64()
	}
	return half.BFloat16(b).Float64()
}

// half returns the bits of an f16 or bf16 written as a JSON number (rounded to the
// type, ties to even; a finite number beyond the type's range is an error) or as
// one of the strings "nan", "inf", "-inf" and "0x" followed by 4 hex digits.
func (w *jwalker) half(t Type, v jvalue, what string) (uint32, error) {
	const fix = `write a number, "nan", "inf", "-inf" or the bits as "0x7e01"`
	switch v.kind {
	case jNumber:
		f, err := strconv.ParseFloat(v.text, 64)
		b := round16(t, f)
		if err != nil || math.IsInf(value16(t, b), 0) {
			return 0, w.errAt(v, fix, "%s %s is out of the %s range", what, v.text, t)
		}
		return uint32(b), nil
	case jString:
		switch s := v.text; {
		case s == jsonNaN:
			return uint32(defaultNaN16(t)), nil
		case s == jsonInf:
			return uint32(round16(t, math.Inf(1))), nil
		case s == jsonNegInf:
			return uint32(round16(t, math.Inf(-1))), nil
		case len(s) == 6 && strings.HasPrefix(s, "0x"):
			if n, err := strconv.ParseUint(s[2:], 16, 16); err == nil {
				return uint32(n), nil
			}
		}
		return 0, w.errAt(v, fix, "%s %q is not an %s", what, v.text, t)
	}
	return 0, w.typeErr(v, what, "a number or a string such as \"nan\"")
}

// halfJSON writes the t (F16 or BF16) bits b: integers below 10^7 exactly, other
// finite values in the shortest decimal form that reads back to the same bits (-0
// stays -0), the others as "nan", "inf", "-inf" or their bits ("0x7e01").
func halfJSON(t Type, b uint16) string {
	x := value16(t, b)
	switch {
	case b == defaultNaN16(t):
		return `"` + jsonNaN + `"`
	case math.IsNaN(x):
		return fmt.Sprintf(`"0x%04x"`, b)
	case math.IsInf(x, 1):
		return `"` + jsonInf + `"`
	case math.IsInf(x, -1):
		return `"` + jsonNegInf + `"`
	}
	if x == math.Trunc(x) && math.Abs(x) < 1e7 {
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	for prec := 1; prec < 17; prec++ {
		s := strconv.FormatFloat(x, 'g', prec, 64)
		if f, err := strconv.ParseFloat(s, 64); err == nil && round16(t, f) == b {
			return s
		}
	}
	return strconv.FormatFloat(x, 'g', -1, 64)
}

// matrixStmtShape is stmtShape for the matrix statements.
func matrixStmtShape(key string) (extras []string, ok bool) {
	switch key {
	case "matrix_fill":
		return []string{"value"}, true
	case "matrix_load":
		return []string{"from", "offset", "stride", "layout", "bound"}, true
	case "matrix_store":
		return []string{"to", "offset", "stride", "layout", "bound"}, true
	case "matrix_mma":
		return []string{"a", "b", "precision"}, true
	case "matrix_convert":
		return []string{"from"}, true
	}
	return nil, false
}

func (w *jwalker) matrixDecl(v jvalue) (MatrixDecl, error) {
	const what = "a matrix"
	m, name, t, err := w.typedDecl(v, what, "matrix type", "rows", "cols")
	d := MatrixDecl{Name: name, Type: t}
	if err != nil {
		return d, err
	}
	if d.Rows, err = w.needU32(m, v, "rows", what); err != nil {
		return d, err
	}
	d.Cols, err = w.needU32(m, v, "cols", what)
	return d, err
}

// matrixStmt reads the matrix statement named key (one matrixStmtShape accepts).
func (w *jwalker) matrixStmt(key string, v jvalue, m map[string]jvalue, depth int) (Stmt, error) {
	what := fmt.Sprintf("statement %q", key)
	name, err := w.str(m[key], strconv.Quote(key))
	if err != nil {
		return nil, err
	}
	switch key {
	case "matrix_fill":
		x, err := w.sub(m, v, "value", what, ".value", depth+1)
		return MatrixFillStmt{Matrix: name, Value: x}, err
	case "matrix_load", "matrix_store":
		arrayKey := "from"
		if key == "matrix_store" {
			arrayKey = "to"
		}
		array, err := w.needStr(m, v, arrayKey, what)
		if err != nil {
			return nil, err
		}
		a, err := w.addressing(v, m, what, depth)
		if err != nil {
			return nil, err
		}
		return matrixCopy{key != "matrix_load", name, array, a.offset, a.stride, a.layout, a.bound}.stmt(), nil
	case "matrix_mma":
		s := MatrixMMAStmt{Acc: name}
		if s.A, err = w.needStr(m, v, "a", what); err != nil {
			return nil, err
		}
		if s.B, err = w.needStr(m, v, "b", what); err != nil {
			return nil, err
		}
		if pv, ok := m["precision"]; ok {
			p, err := w.str(pv, `"precision"`)
			if err != nil {
				return nil, err
			}
			var known bool
			if s.Precision, known = ParseMatrixPrecision(p); !known || p == "" {
				return nil, w.errAt(pv, `write "precision": "tf32", or leave "precision" out`, "precision %q is not defined", p)
			}
		}
		return s, nil
	}
	from, err := w.needStr(m, v, "from", what)
	return MatrixConvertStmt{Matrix: name, From: from}, err
}

type jaddressing struct {
	offset, stride Expr
	layout         MatrixLayout
	bound          *MatrixBound
}

// addressing reads a matrix load's or store's offset, stride, layout and optional
// bound [R, C].
func (w *jwalker) addressing(v jvalue, m map[string]jvalue, what string, depth int) (jaddressing, error) {
	var a jaddressing
	var err error
	if a.offset, err = w.sub(m, v, "offset", what, ".offset", depth+1); err != nil {
		return a, err
	}
	if a.stride, err = w.sub(m, v, "stride", what, ".stride", depth+1); err != nil {
		return a, err
	}
	lv, err := w.need(m, v, "layout", what)
	if err != nil {
		return a, err
	}
	layout, err := w.str(lv, `"layout"`)
	if err != nil {
		return a, within(".layout", err)
	}
	var ok bool
	if a.layout, ok = ParseMatrixLayout(layout); !ok {
		return a, within(".layout", w.errAt(lv, `write "row" or "col"`, "layout %q is not defined", layout))
	}
	bv, ok := m["bound"]
	if !ok {
		return a, nil
	}
	elems, err := w.array(bv, `"bound"`)
	if err != nil {
		return a, within(".bound", err)
	}
	if len(elems) != 2 {
		return a, within(".bound", w.errAt(bv, `write "bound": [ROWS, COLS], or leave "bound" out`, "bound has %d entries, want 2", len(elems)))
	}
	var xs [2]Expr
	for i, e := range elems {
		if xs[i], err = w.expr(e, depth+1); err != nil {
			return a, within(".bound"+index(i), err)
		}
	}
	a.bound = &MatrixBound{Rows: xs[0], Cols: xs[1]}
	return a, nil
}

func (w *jwriter) matrixDecl(d MatrixDecl) error {
	if err := w.nameAndType("name", d.Name, d.Type); err != nil {
		return err
	}
	w.raw(fmt.Sprintf(`, "rows": %d, "cols": %d}`, d.Rows, d.Cols))
	return nil
}

// names writes `"key": "name"` pairs after a statement's node key.
func (w *jwriter) names(kv ...string) error {
	for i := 0; i+1 < len(kv); i += 2 {
		w.raw(`, "` + kv[i] + `": `)
		if err := w.quote(kv[i+1]); err != nil {
			return err
		}
	}
	return nil
}

// matrixStmt writes a matrix statement without its closing brace.
func (w *jwriter) matrixStmt(s Stmt, depth int) error {
	switch s := s.(type) {
	case MatrixFillStmt:
		w.raw(`{"matrix_fill": `)
		if err := w.quote(s.Matrix); err != nil {
			return err
		}
		return w.key("value", ".value", s.Value, depth+1)
	case MatrixLoadStmt, MatrixStoreStmt:
		mc, _ := asMatrixCopy(s)
		w.raw(`{"` + mc.op() + `": `)
		if err := w.quote(mc.matrix); err != nil {
			return err
		}
		if err := w.names(mc.arrayKey(), mc.array); err != nil {
			return err
		}
		return w.addressing(mc.offset, mc.stride, mc.layout, mc.bound, depth)
	case MatrixMMAStmt:
		if !s.Precision.Valid() {
			return within(".precision", marshalErr(`use ir.PrecisionDefault or ir.PrecisionTF32`, "precision %d is not defined", s.Precision))
		}
		w.raw(`{"matrix_mma": `)
		if err := w.quote(s.Acc); err != nil {
			return err
		}
		if err := w.names("a", s.A, "b", s.B); err != nil {
			return err
		}
		if s.Precision != PrecisionDefault {
			return w.names("precision", s.Precision.String())
		}
		return nil
	case MatrixConvertStmt:
		w.raw(`{"matrix_convert": `)
		if err := w.quote(s.Matrix); err != nil {
			return err
		}
		return w.names("from", s.From)
	}
	return marshalErr("build statements with the ir package's types", "unknown statement type %T", s)
}

func (w *jwriter) addressing(offset, stride Expr, layout MatrixLayout, bound *MatrixBound, depth int) error {
	if err := w.key("offset", ".offset", offset, depth+1); err != nil {
		return err
	}
	if err := w.key("stride", ".stride", stride, depth+1); err != nil {
		return err
	}
	if !layout.Valid() {
		return within(".layout", marshalErr("use ir.RowMajor or ir.ColMajor", "layout %d is not defined", layout))
	}
	if err := w.names("layout", layout.String()); err != nil {
		return err
	}
	if bound == nil {
		return nil
	}
	w.raw(`, "bound": [`)
	if err := within(".bound[0]", w.expr(bound.Rows, depth+1)); err != nil {
		return err
	}
	w.raw(", ")
	if err := within(".bound[1]", w.expr(bound.Cols, depth+1)); err != nil {
		return err
	}
	w.b = append(w.b, ']')
	return nil
}
