package autotune

import (
	"fmt"
	"sort"

	"github.com/kiln-dev/kiln/internal/tomlstore"
)

// Schema is the newest store file schema this package reads and writes.
// Schema 2 adds a record's params and schema 3 its program name; a file is
// written as the oldest schema that holds its records (1 while no record has
// params or a program name), so an older kiln keeps reading what it can.
const Schema = 3

// oldestSchema is the oldest schema this package reads.
const oldestSchema = 1

// fileDoc is the file as decoded; pointers tell a missing field from a zero one.
type fileDoc struct {
	Schema int64       `toml:"schema"`
	Record []recordDoc `toml:"record"`
}

type recordDoc struct {
	Key           *string  `toml:"key"`
	Adapter       *string  `toml:"adapter"`
	WorkgroupSize []uint32 `toml:"workgroup_size"`
	Unroll        *uint32  `toml:"unroll"`
	Tile          []uint32 `toml:"tile"`
	Params        *string  `toml:"params"`
	RecordedAt    string   `toml:"recorded_at"`
	Program       *string  `toml:"program"`
}

// fileOut is the file as written.
type fileOut struct {
	Schema int         `toml:"schema"`
	Record []recordOut `toml:"record,omitempty"`
}

type recordOut struct {
	Key           string    `toml:"key"`
	Adapter       string    `toml:"adapter"`
	WorkgroupSize [3]uint32 `toml:"workgroup_size"`
	Unroll        uint32    `toml:"unroll"`
	Tile          [3]uint32 `toml:"tile"`
	Params        string    `toml:"params,omitempty"`
	RecordedAt    string    `toml:"recorded_at"`
	Program       string    `toml:"program,omitempty"`
}

// parse decodes a store file. Errors are *tomlstore.FormatError or
// *tomlstore.NewerSchemaError.
func parse(data []byte) (map[Key]Record, error) {
	var doc fileDoc
	schema, err := tomlstore.DecodeSchemas(data, oldestSchema, Schema, &doc)
	if err != nil {
		return nil, err
	}
	records := make(map[Key]Record, len(doc.Record))
	for i, r := range doc.Record {
		bad := func(format string, args ...any) error {
			return &tomlstore.FormatError{Where: fmt.Sprintf("record %d", i+1), Msg: fmt.Sprintf(format, args...)}
		}
		switch {
		case r.Key == nil || r.Adapter == nil || r.Unroll == nil:
			return nil, bad("key, adapter and unroll are required")
		case !validHex(*r.Key):
			return nil, bad("key %q is not 32 lowercase hex digits", *r.Key)
		case len(r.WorkgroupSize) != 3:
			return nil, bad("workgroup_size has %d numbers, want 3", len(r.WorkgroupSize))
		case len(r.Tile) != 3:
			return nil, bad("tile has %d numbers, want 3", len(r.Tile))
		}
		params := ""
		if r.Params != nil {
			if schema < 2 {
				return nil, bad("params needs schema 2")
			}
			if err := checkParams(*r.Params); err != nil {
				return nil, bad("%v", err)
			}
			params = *r.Params
		}
		program := ""
		if r.Program != nil {
			switch {
			case schema < 3:
				return nil, bad("program needs schema 3")
			case *r.Program == "":
				return nil, bad("program is empty (leave it out instead)")
			}
			program = *r.Program
		}
		k := Key{hex: *r.Key, adapter: *r.Adapter}
		if _, dup := records[k]; dup {
			return nil, bad("a second record for key %s", k)
		}
		records[k] = Record{
			WorkgroupSize: [3]uint32(r.WorkgroupSize),
			Unroll:        *r.Unroll,
			Tile:          [3]uint32(r.Tile),
			Params:        params,
			RecordedAt:    r.RecordedAt,
			Program:       program,
		}
	}
	return records, nil
}

// encode writes records sorted by key then adapter, in the oldest schema that
// holds them: 1 when no record has params or a program name, 2 when some have
// params but none a program name, else 3.
func encode(records map[Key]Record) ([]byte, error) {
	out := fileOut{Schema: oldestSchema}
	for k, r := range records {
		out.Record = append(out.Record, recordOut{k.hex, k.adapter, r.WorkgroupSize, r.Unroll, r.Tile, r.Params, r.RecordedAt, r.Program})
		switch {
		case r.Program != "":
			out.Schema = 3
		case r.Params != "":
			out.Schema = max(out.Schema, 2)
		}
	}
	sort.Slice(out.Record, func(i, j int) bool {
		a, b := out.Record[i], out.Record[j]
		if a.Key != b.Key {
			return a.Key < b.Key
		}
		return a.Adapter < b.Adapter
	})
	return tomlstore.Encode(out)
}
