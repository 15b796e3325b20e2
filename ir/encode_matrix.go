package ir

// The binary encoding of IR v1.2's matrices (format version 3; see the top of
// encode.go).

// minMatrixBytes is the smallest encoded matrix declaration: empty name, type,
// rows, cols.
const minMatrixBytes = 1 + 1 + 1 + 1

// The bound flag of a matrix load or store.
const (
	wireNoBound byte = 0x00
	wireBound   byte = 0x01
)

func (e *encoder) matrix(m MatrixDecl) error {
	if err := e.str(m.Name); err != nil {
		return err
	}
	if err := e.typ(m.Type); err != nil {
		return err
	}
	e.uvarint(uint64(m.Rows))
	e.uvarint(uint64(m.Cols))
	return nil
}

// strs encodes names.
func (e *encoder) strs(names ...string) error {
	for _, n := range names {
		if err := e.str(n); err != nil {
			return err
		}
	}
	return nil
}

func (e *encoder) matrixStmt(s Stmt, depth int) error {
	switch s := s.(type) {
	case MatrixFillStmt:
		e.buf = append(e.buf, tagMatrixFill)
		if err := e.str(s.Matrix); err != nil {
			return err
		}
		return within(".value", e.expr(s.Value, depth+1))
	case MatrixLoadStmt, MatrixStoreStmt:
		mc, _ := asMatrixCopy(s)
		tag := tagMatrixLoad
		if mc.store {
			tag = tagMatrixStore
		}
		e.buf = append(e.buf, tag)
		if err := e.strs(mc.matrix, mc.array); err != nil {
			return err
		}
		return e.addressing(mc.offset, mc.stride, mc.layout, mc.bound, depth)
	case MatrixMMAStmt:
		e.buf = append(e.buf, tagMatrixMMA)
		if err := e.strs(s.Acc, s.A, s.B); err != nil {
			return err
		}
		c, ok := wirePrecisions.code(s.Precision)
		if !ok {
			return within(".precision", encodeErr("use ir.PrecisionDefault or ir.PrecisionTF32", "precision %d has no wire code", s.Precision))
		}
		e.buf = append(e.buf, c)
		return nil
	case MatrixConvertStmt:
		e.buf = append(e.buf, tagMatrixConvert)
		return e.strs(s.Matrix, s.From)
	}
	return encodeErr("build statements with the ir package's types", "unknown statement type %T", s)
}

func (e *encoder) addressing(offset, stride Expr, layout MatrixLayout, bound *MatrixBound, depth int) error {
	if err := e.expr(offset, depth+1); err != nil {
		return within(".offset", err)
	}
	if err := e.expr(stride, depth+1); err != nil {
		return within(".stride", err)
	}
	c, ok := wireLayouts.code(layout)
	if !ok {
		return within(".layout", encodeErr("use ir.RowMajor or ir.ColMajor", "layout %d has no wire code", layout))
	}
	e.buf = append(e.buf, c)
	if bound == nil {
		e.buf = append(e.buf, wireNoBound)
		return nil
	}
	e.buf = append(e.buf, wireBound)
	if err := e.expr(bound.Rows, depth+1); err != nil {
		return within(".bound[0]", err)
	}
	return within(".bound[1]", e.expr(bound.Cols, depth+1))
}

func (d *decoder) matrix() (MatrixDecl, error) {
	var m MatrixDecl
	var err error
	if m.Name, err = d.str("matrix name"); err != nil {
		return m, err
	}
	if m.Type, err = d.typ(); err != nil {
		return m, err
	}
	if m.Rows, err = d.u32("matrix rows"); err != nil {
		return m, err
	}
	m.Cols, err = d.u32("matrix cols")
	return m, err
}

// strs decodes names into the pointed-to strings.
func (d *decoder) strs(what string, dst ...*string) error {
	for _, p := range dst {
		s, err := d.str(what)
		if err != nil {
			return err
		}
		*p = s
	}
	return nil
}

// matrixStmt reads the statement of a matrix tag (version 3).
func (d *decoder) matrixStmt(tag byte, depth int) (Stmt, error) {
	var err error
	switch tag {
	case tagMatrixFill:
		var s MatrixFillStmt
		if s.Matrix, err = d.str("matrix name"); err != nil {
			return nil, err
		}
		if err := d.exprs(depth+1, &s.Value); err != nil {
			return nil, err
		}
		return s, nil
	case tagMatrixLoad, tagMatrixStore:
		mc := matrixCopy{store: tag == tagMatrixStore}
		if err := d.strs("matrix name", &mc.matrix, &mc.array); err != nil {
			return nil, err
		}
		if err := d.addressing(depth, &mc.offset, &mc.stride, &mc.layout, &mc.bound); err != nil {
			return nil, err
		}
		return mc.stmt(), nil
	case tagMatrixMMA:
		var s MatrixMMAStmt
		if err := d.strs("matrix name", &s.Acc, &s.A, &s.B); err != nil {
			return nil, err
		}
		if s.Precision, err = decodeEnum(d, wirePrecisions, noV2, "a matrix precision"); err != nil {
			return nil, err
		}
		return s, nil
	}
	var s MatrixConvertStmt
	if err := d.strs("matrix name", &s.Matrix, &s.From); err != nil {
		return nil, err
	}
	return s, nil
}

func (d *decoder) addressing(depth int, offset, stride *Expr, layout *MatrixLayout, bound **MatrixBound) error {
	if err := d.exprs(depth+1, offset, stride); err != nil {
		return err
	}
	var err error
	if *layout, err = decodeEnum(d, wireLayouts, noV2, "a matrix layout"); err != nil {
		return err
	}
	start := d.off
	flag, err := d.next("a bound flag")
	if err != nil {
		return err
	}
	switch flag {
	case wireNoBound:
		return nil
	case wireBound:
		b := &MatrixBound{}
		if err := d.exprs(depth+1, &b.Rows, &b.Cols); err != nil {
			return err
		}
		*bound = b
		return nil
	}
	return d.failAt(start, "expected a bound flag (0x00 or 0x01), got %#02x", flag)
}
