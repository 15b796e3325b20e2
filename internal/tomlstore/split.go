package tomlstore

import (
	"bytes"
	"fmt"
	"maps"

	toml "github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"
)

// DecodeSplit is DecodeSchemas for a file whose field named table is a table
// of tables, one per entry (pgo's [routes."<op>"]), in time linear in the
// number of entries: it decodes every other field into head and returns the
// entries.
//
// One go-toml Decode of such a file costs O(n²) in its n entries: its
// duplicate-key tracker searches every key seen so far for each new one, and
// each [[array table]] walks the counters of every array table seen so far.
// DecodeSplit parses the file once and splits it at its top-level expressions
// into one document per entry (every expression under table."<name>", in file
// order, with the entry's name replaced by one short key, so every document
// has the same array tables) and one of everything else; go-toml decodes each
// on its own, strictly, and the table's own key, the only one the documents
// share, is checked here by go-toml's rules. Errors are those of
// DecodeSchemas, with the line and column in data, but for one: where go-toml
// would take a key that differs from table only in case ([ROUTES.op]) for the
// table, DecodeSplit refuses it as an unknown field; and a file of a newer
// schema is a *NewerSchemaError even where an entry would not decode.
func DecodeSplit[T any](data []byte, oldest, newest int64, table string, head any) (int64, map[string]T, error) {
	s := splitter{data: data, table: table, entries: map[string]*piece{}}
	if err := s.split(); err != nil {
		return 0, nil, err
	}
	var schema struct {
		Schema *int64 `toml:"schema"`
	}
	if err := toml.Unmarshal(s.rest.buf, &schema); err != nil {
		return 0, nil, s.rest.formatError(err)
	}
	switch {
	case schema.Schema == nil:
		return 0, nil, &FormatError{Msg: fmt.Sprintf("no schema line (want schema = %d)", newest)}
	case *schema.Schema > newest:
		return 0, nil, &NewerSchemaError{Found: *schema.Schema, Supported: newest}
	case *schema.Schema < oldest:
		return 0, nil, &FormatError{Msg: fmt.Sprintf("schema %d, want %d to %d", *schema.Schema, oldest, newest)}
	}
	if err := decodeStrict(&s.rest, head); err != nil {
		return 0, nil, err
	}
	entries := make(map[string]T, len(s.order))
	if s.whole != nil {
		var doc map[string]map[string]T
		if err := decodeStrict(s.whole, &doc); err != nil {
			return 0, nil, err
		}
		maps.Copy(entries, doc[table])
	}
	for _, name := range s.order {
		var doc map[string]map[string]T
		if err := decodeStrict(s.entries[name], &doc); err != nil {
			return 0, nil, err
		}
		entries[name] = doc[table][entryKey]
	}
	return *schema.Schema, entries, nil
}

// entryKey is the name every entry's document gives its entry.
const entryKey = "e"

func decodeStrict(p *piece, v any) error {
	dec := toml.NewDecoder(bytes.NewReader(p.buf))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return p.formatError(err)
	}
	return nil
}

// piece is one of the documents a file is split into: its text, and where
// each run of its lines came from in the file.
type piece struct {
	buf []byte
	// lines is the number of newlines in buf.
	lines int
	// runs map buf's lines back to the file's, in order.
	runs []lineRun
	// section is the number of the last [table] header this piece repeats.
	section int
}

// lineRun says that line at of a piece is line line of the file, and so are
// the lines that follow it until the next run. On line at, the columns after
// col are shift columns further right in the file (the entry's name there was
// replaced by entryKey).
type lineRun struct{ at, line, col, shift int }

// add appends text, which starts at the file's line line; a non-nil name is
// the entry's name in text, replaced by entryKey.
func (p *piece) add(text []byte, line int, name []byte) {
	run := lineRun{at: p.lines + 1, line: line}
	if name != nil {
		at := cap(text) - cap(name) // name lies in text
		run.col, run.shift = at+1, len(name)-len(entryKey)
		p.buf = append(append(append(p.buf, text[:at]...), entryKey...), text[at+len(name):]...)
	} else {
		p.buf = append(p.buf, text...)
	}
	p.runs = append(p.runs, run)
	p.lines += bytes.Count(text, []byte{'\n'})
}

// formatError is formatError with the position moved from the piece to the
// file.
func (p *piece) formatError(err error) error {
	fe, ok := formatError(err).(*FormatError)
	if !ok {
		return err
	}
	var row, col int
	if _, scanErr := fmt.Sscanf(fe.Where, "line %d, column %d", &row, &col); scanErr != nil {
		return fe
	}
	for i := len(p.runs) - 1; i >= 0; i-- {
		r := p.runs[i]
		if r.at > row {
			continue
		}
		if row == r.at && r.shift != 0 && col > r.col {
			col += r.shift
		}
		fe.Where = fmt.Sprintf("line %d, column %d", r.line+row-r.at, col)
		break
	}
	return fe
}

// The table's own key, by go-toml's rules: how it was defined.
const (
	tableAbsent   = iota
	tableDotted   // by a dotted key at the top level: table.name.field = …
	tableImplicit // as the parent of a [table.name…] header
	tableExplicit // by its own [table] header
	tableValue    // whole, as one value: table = {…}
)

type splitter struct {
	data  []byte
	table string
	// rest holds every expression outside the table, and whole the
	// expression that gives the table as one value, if any.
	rest  piece
	whole *piece
	// entries holds each entry's expressions; order lists the names as they
	// first appear.
	entries map[string]*piece
	order   []string
	state   int
}

// split parses the file and fills rest, whole and entries.
func (s *splitter) split() error {
	var (
		p     unstable.Parser
		start int // where the text not yet given to a piece starts
		line  = 1 // start's line
		// section is the current [header]'s key, sectionAt its number,
		// sectionLine its line and sectionKey the table key's text in it.
		section     []string
		sectionAt   int
		sectionLine int
		sectionKey  []byte
		// into is the piece the text up to the next expression goes to, nil
		// to drop it (comments, the line of a [table] header); name is the
		// entry's name in that text.
		into *piece
		name []byte
	)
	// give hands the text up to end to into.
	give := func(end int) {
		if into != nil {
			into.add(s.data[start:end], line, name)
		}
		line += bytes.Count(s.data[start:end], []byte{'\n'})
		start = end
	}
	p.Reset(s.data)
	for p.NextExpression() {
		expr := p.Expression()
		var (
			parts [][]byte
			raws  []unstable.Range
		)
		for it := expr.Key(); it.Next(); {
			parts = append(parts, it.Node().Data)
			raws = append(raws, it.Node().Raw)
		}
		keyAt := int(raws[0].Offset)
		give(bytes.LastIndexByte(s.data[start:keyAt], '\n') + start + 1)
		name = nil
		// raw is the text of key part i.
		raw := func(i int) []byte { return p.Raw(raws[i]) }
		switch expr.Kind {
		case unstable.Table, unstable.ArrayTable:
			section = section[:0]
			for _, part := range parts {
				section = append(section, string(part))
			}
			sectionAt++
			sectionLine = line
			sectionKey = raw(0)
			switch {
			case section[0] != s.table:
				into = &s.rest
			case expr.Kind == unstable.ArrayTable && len(parts) == 1:
				return &FormatError{offsetPosition(s.data, keyAt), fmt.Sprintf("%s is an array of tables; it must be a table", s.table)}
			case len(parts) == 1:
				if err := s.define(keyAt); err != nil {
					return err
				}
				into = nil
				give(lineEnd(s.data, keyAt))
			default:
				if err := s.touch(keyAt, tableImplicit); err != nil {
					return err
				}
				into, name = s.entry(section[1]), raw(1)
			}
		case unstable.KeyValue:
			inSection := len(section)
			if inSection == 0 && string(parts[0]) != s.table || inSection > 0 && section[0] != s.table {
				into = &s.rest
				continue
			}
			switch {
			case inSection == 0 && len(parts) == 1:
				if s.state != tableAbsent {
					return &FormatError{offsetPosition(s.data, keyAt), fmt.Sprintf("key %s is already defined", s.table)}
				}
				s.state = tableValue
				s.whole = &piece{}
				into = s.whole
			case inSection == 0:
				if err := s.touch(keyAt, tableDotted); err != nil {
					return err
				}
				into, name = s.entry(string(parts[1])), raw(1)
			case inSection == 1:
				into, name = s.entry(string(parts[0])), raw(0)
				if into.section != sectionAt {
					into.section = sectionAt
					into.add(append(append([]byte{'['}, sectionKey...), ']', '\n'), sectionLine, nil)
				}
			default:
				into = s.entry(section[1])
			}
		}
	}
	if err := p.Error(); err != nil {
		return parserError(s.data, err)
	}
	give(len(s.data))
	return nil
}

// define applies a [table] header whose key is at offset to the table's
// state.
func (s *splitter) define(offset int) error {
	switch s.state {
	case tableExplicit:
		return &FormatError{offsetPosition(s.data, offset), fmt.Sprintf("table %s already exists", s.table)}
	case tableDotted:
		return &FormatError{offsetPosition(s.data, offset), fmt.Sprintf("table %s already exists as defined by a dotted key", s.table)}
	case tableValue:
		return &FormatError{offsetPosition(s.data, offset), fmt.Sprintf("key %s already exists as a value", s.table)}
	}
	s.state = tableExplicit
	return nil
}

// touch applies a key below the table's (a header's or a dotted key's, at
// offset) to the table's state, which becomes state if it was absent.
func (s *splitter) touch(offset, state int) error {
	switch s.state {
	case tableAbsent:
		s.state = state
	case tableValue:
		return &FormatError{offsetPosition(s.data, offset), fmt.Sprintf("key %s already exists as a value", s.table)}
	}
	return nil
}

func (s *splitter) entry(name string) *piece {
	e, ok := s.entries[name]
	if !ok {
		e = &piece{}
		s.entries[name] = e
		s.order = append(s.order, name)
	}
	return e
}

// lineEnd is the offset just past the newline that ends offset's line, or the
// end of data.
func lineEnd(data []byte, offset int) int {
	if i := bytes.IndexByte(data[offset:], '\n'); i >= 0 {
		return offset + i + 1
	}
	return len(data)
}

// offsetPosition is "line L, column C" of offset in data.
func offsetPosition(data []byte, offset int) string {
	before := data[:offset]
	return fmt.Sprintf("line %d, column %d", bytes.Count(before, []byte{'\n'})+1, offset-bytes.LastIndexByte(before, '\n'))
}

// parserError is a *FormatError for an error of go-toml's parser, at its
// highlight when that lies in data.
func parserError(data []byte, err error) error {
	pe, ok := err.(*unstable.ParserError)
	if !ok {
		return &FormatError{Msg: err.Error()}
	}
	fe := &FormatError{Msg: pe.Message}
	if off := cap(data) - cap(pe.Highlight); pe.Highlight != nil && off >= 0 && off <= len(data) {
		fe.Where = offsetPosition(data, off)
	}
	return fe
}
