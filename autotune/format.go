package autotune

import (
	"fmt"
	"sort"

	"github.com/kiln-dev/kiln/internal/tomlstore"
)

// Schema is the store file schema this package reads and writes.
const Schema = 1

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
	RecordedAt    string   `toml:"recorded_at"`
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
	RecordedAt    string    `toml:"recorded_at"`
}

// parse decodes a store file. Errors are *tomlstore.FormatError or
// *tomlstore.NewerSchemaError.
func parse(data []byte) (map[Key]Record, error) {
	var doc fileDoc
	if err := tomlstore.Decode(data, Schema, &doc); err != nil {
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
		k := Key{hex: *r.Key, adapter: *r.Adapter}
		if _, dup := records[k]; dup {
			return nil, bad("a second record for key %s", k)
		}
		records[k] = Record{
			WorkgroupSize: [3]uint32(r.WorkgroupSize),
			Unroll:        *r.Unroll,
			Tile:          [3]uint32(r.Tile),
			RecordedAt:    r.RecordedAt,
		}
	}
	return records, nil
}

// encode writes records as a schema-1 file, sorted by key then adapter.
func encode(records map[Key]Record) ([]byte, error) {
	out := fileOut{Schema: Schema}
	for k, r := range records {
		out.Record = append(out.Record, recordOut{k.hex, k.adapter, r.WorkgroupSize, r.Unroll, r.Tile, r.RecordedAt})
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
