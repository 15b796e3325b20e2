package tomlstore

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// splitHead is a store file's other fields, splitEntry one entry of its table
// of tables, and splitWhole the same file decoded in one piece.
type splitHead struct {
	Schema int64    `toml:"schema"`
	Names  []string `toml:"names"`
	Items  []struct {
		X int64 `toml:"x"`
	} `toml:"items"`
}

type splitEntry struct {
	Backend *string `toml:"backend"`
	N       int64   `toml:"n"`
	Obs     []struct {
		B  string `toml:"b"`
		Ns *int64 `toml:"ns"`
	} `toml:"obs"`
	Classes []struct {
		Bytes int64 `toml:"bytes"`
		Obs   []struct {
			B string `toml:"b"`
		} `toml:"obs"`
	} `toml:"classes"`
	Sub map[string]string `toml:"sub"`
}

type splitWhole struct {
	Schema int64    `toml:"schema"`
	Names  []string `toml:"names"`
	Items  []struct {
		X int64 `toml:"x"`
	} `toml:"items"`
	Routes map[string]splitEntry `toml:"routes"`
}

// splitAgrees decodes data both ways and says how they differ, or "".
func splitAgrees(data []byte) string {
	var head splitHead
	schema, entries, err := DecodeSplit[splitEntry](data, 1, 2, "routes", &head)
	var whole splitWhole
	wholeSchema, wholeErr := DecodeSchemas(data, 1, 2, &whole)
	var fe *FormatError
	if errors.As(err, &fe) && wholeErr == nil {
		if field, ok := strings.CutPrefix(fe.Msg, "unknown field "); ok {
			key, _, _ := strings.Cut(field, ".")
			if strings.EqualFold(key, "routes") && key != "routes" {
				return "" // DecodeSplit's documented refusal
			}
		}
	}
	switch {
	case (err == nil) != (wholeErr == nil):
		return "split: " + errString(err) + "; whole: " + errString(wholeErr)
	case err != nil:
		// DecodeSplit reads the schema before the entries: a newer schema
		// is reported as such even when an entry would not decode.
		var ne, wne *NewerSchemaError
		if !errors.As(err, &ne) && errors.As(wholeErr, &wne) {
			return "split: " + err.Error() + "; whole: " + wholeErr.Error()
		}
		return ""
	}
	if len(entries) == 0 && len(whole.Routes) == 0 {
		whole.Routes, entries = nil, nil
	}
	if schema != wholeSchema || !reflect.DeepEqual(head, splitHead{whole.Schema, whole.Names, whole.Items}) || !reflect.DeepEqual(entries, whole.Routes) {
		return "decoded differently"
	}
	return ""
}

func errString(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

// splitCases are files both ways must agree on: every way TOML has to write a
// table of tables, and the ways to write one wrong.
var splitCases = map[string]string{
	"canonical":         "schema = 1\nnames = ['a']\n[routes.a]\nbackend = 'x'\nn = 1\n[[routes.a.obs]]\nb = 'x'\nns = 5\n[[routes.a.obs]]\nb = 'y'\n[routes.\"b.c\"]\nbackend = 'y'\n",
	"comments and CRLF": "# head\r\nschema = 1 # one\r\n\r\n# before\r\n[routes.a] # a\r\nbackend = 'x'\r\n# after\r\n",
	"classes":           "schema = 2\n[routes.a]\nbackend = 'x'\n[[routes.a.classes]]\nbytes = 1\n[[routes.a.classes.obs]]\nb = 'x'\n[[routes.a.classes]]\nbytes = 2\n[[routes.a.classes.obs]]\nb = 'y'\n[[routes.b.classes]]\nbytes = 3\n",
	"interleaved":       "schema = 1\n[routes.a]\nbackend = 'x'\n[routes.b]\nbackend = 'y'\n[[routes.a.obs]]\nb = 'x'\n[items]\n[routes.a.sub]\nk = 'v'\n",
	"quoted spellings":  "schema = 1\n[routes.a]\nbackend = 'x'\n[routes.'a'.sub]\nk = 'v'\n[\"routes\".\"a\".\"sub2\"]\n",
	"routes section":    "schema = 1\n[routes]\na.backend = 'x'\nb = { backend = 'y', obs = [{ b = 'y' }] }\n[routes.a.sub]\nk = 'v'\n[routes.c]\nn = 3\n",
	"section after":     "schema = 1\n[routes.a.sub]\nk = 'v'\n[routes]\nb.n = 2\n",
	"dotted at root":    "schema = 1\nroutes.a.backend = 'x'\nroutes.a.n = 2\nroutes.b = { backend = 'y' }\n[routes.c]\nbackend = 'z'\n",
	"inline whole":      "schema = 1\nroutes = { a = { backend = 'x' }, b = { n = 2 } }\n",
	"inline empty":      "schema = 1\nroutes = {}\n",
	"header only":       "schema = 1\n[routes]\n",
	"empty route":       "schema = 1\n[routes.a]\n",
	"array of items":    "schema = 1\n[[items]]\nx = 1\n[[items]]\nx = 2\n[routes.a]\nn = 1\n",
	"multi-line value":  "schema = 1\n[routes.a]\nbackend = '''\nx\n'''\nn = 1\n",

	"two headers":           "schema = 1\n[routes.a]\nn = 1\n[routes.a]\nn = 2\n",
	"two spellings":         "schema = 1\n[routes.a]\nn = 1\n[routes.'a']\nbackend = 'x'\n",
	"key twice":             "schema = 1\n[routes.a]\nn = 1\nn = 2\n",
	"routes header twice":   "schema = 1\n[routes]\n[routes.a]\n[routes]\n",
	"header after dotted":   "schema = 1\nroutes.a.n = 1\n[routes]\n",
	"header after whole":    "schema = 1\nroutes = {}\n[routes.a]\n",
	"dotted after whole":    "schema = 1\nroutes = {}\nroutes.a.n = 1\n",
	"whole after dotted":    "schema = 1\nroutes.a.n = 1\nroutes = {}\n",
	"routes array":          "schema = 1\n[[routes]]\nn = 1\n",
	"route array":           "schema = 1\n[[routes.a]]\nn = 1\n",
	"routes a value":        "schema = 1\nroutes = 5\n",
	"section kv then table": "schema = 1\n[routes]\na.n = 1\n[routes.a]\n",
	"table then section kv": "schema = 1\n[routes.a.sub]\n[routes]\na.n = 1\n",
	"unknown field":         "schema = 1\n[routes.a]\nspeed = 'fast'\n",
	"unknown head field":    "schema = 1\nspeed = 'fast'\n[routes.a]\n",
	"wrong type":            "schema = 1\n[routes.a]\nbackend = 3\n",
	"no schema":             "[routes.a]\nbackend = 'x'\n",
	"newer schema":          "schema = 3\n[routes.a]\nspeed = 'new'\n",
	"older schema":          "schema = 0\n",
	"syntax":                "schema = 1\n[routes.a]\nbackend = 'x\n",
	"truncated":             "schema = 1\n[routes.",
	"empty":                 "",
}

func TestDecodeSplitAgreesWithOneDecode(t *testing.T) {
	for name, data := range splitCases {
		if diff := splitAgrees([]byte(data)); diff != "" {
			t.Errorf("%s: %s", name, diff)
		}
	}
}

func TestDecodeSplitErrorsGiveTheFilesLineAndColumn(t *testing.T) {
	cases := []struct{ name, data, where, msg string }{
		{"wrong type", "schema = 1\n[routes.a]\nbackend = 'x'\n[routes.b]\nn = 1\n\n[routes.c]\n# c\nbackend = 3\n", "line 9, column 11", ""},
		{"unknown field", "schema = 1\n[routes.a]\nbackend = 'x'\n[routes.b]\nspeed = 1\n", "line 5, column 1", "unknown field routes.e.speed"},
		{"header twice", "schema = 1\n[routes.a]\nn = 1\n[routes.b]\n[routes.a]\n", "line 5", "already exists"},
		{"after a long name", "schema = 1\n[routes.\"long.name\"]  \nn = 1\n [ routes . \"long.name\" . sub ]\n[routes . \"long.name\" . sub ]\n", "line 5, column 2", "already exists"},
		{"dotted after a long name", "schema = 1\nroutes.'long.name'.n = 1\nroutes.'long.name'.n = 2\n", "line 3", "already defined"},
		{"routes twice", "schema = 1\n[routes]\n[routes]\n", "line 3, column 2", "table routes already exists"},
		{"in a routes section", "schema = 1\n[routes]\na.n = 1\nb.n = 'two'\n", "line 4, column 7", ""},
		{"syntax", "schema = 1\n[routes.a]\nbackend = 'x\n", "line 3", ""},
		{"head", "schema = 1\nnames = 5\n[routes.a]\n", "line 2", ""},
	}
	for _, c := range cases {
		var head splitHead
		_, _, err := DecodeSplit[splitEntry]([]byte(c.data), 1, 2, "routes", &head)
		var fe *FormatError
		if !errors.As(err, &fe) || !strings.HasPrefix(fe.Where, c.where) || !strings.Contains(fe.Msg, c.msg) {
			t.Errorf("%s: err = %v, want a FormatError at %q containing %q", c.name, err, c.where, c.msg)
			continue
		}
		var whole splitWhole
		_, wholeErr := DecodeSchemas([]byte(c.data), 1, 2, &whole)
		if errors.As(wholeErr, &fe) && !strings.HasPrefix(err.Error(), fe.Where) {
			t.Errorf("%s: err = %v; in one piece: %v", c.name, err, wholeErr)
		}
	}
}

// FuzzDecodeSplit holds DecodeSplit to decoding the file in one piece: both
// accept the same files and decode them to the same values.
func FuzzDecodeSplit(f *testing.F) {
	for _, data := range splitCases {
		f.Add([]byte(data))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if diff := splitAgrees(data); diff != "" {
			t.Fatal(diff)
		}
	})
}

// TestDecodeSplitDecodesEachEntryOnItsOwn pins what makes DecodeSplit linear:
// go-toml decodes pieces whose size does not grow with the number of entries,
// and every entry's piece names its entry alike, so the decoder's array-table
// counters do not grow either.
func TestDecodeSplitDecodesEachEntryOnItsOwn(t *testing.T) {
	largest := func(n int) (rest, entry int) {
		var b strings.Builder
		b.WriteString("schema = 1\n")
		for i := range n {
			fmt.Fprintf(&b, "[routes.\"op%d\"]\nbackend = 'x'\n[[routes.\"op%d\".obs]]\nb = 'x'\n", i, i)
		}
		s := splitter{data: []byte(b.String()), table: "routes", entries: map[string]*piece{}}
		if err := s.split(); err != nil || len(s.order) != n {
			t.Fatalf("split: %v, %d entries", err, len(s.order))
		}
		for _, name := range s.order {
			p := s.entries[name]
			if want := "[routes.e]\nbackend = 'x'\n[[routes.e.obs]]\nb = 'x'\n"; string(p.buf) != want {
				t.Fatalf("%s's piece is %q, want %q", name, p.buf, want)
			}
			entry = max(entry, len(p.buf))
		}
		return len(s.rest.buf), entry
	}
	r1, e1 := largest(10)
	r2, e2 := largest(1000)
	if r1 != r2 || e1 != e2 {
		t.Fatalf("pieces grow with the entries: rest %d and %d bytes, largest entry %d and %d", r1, r2, e1, e2)
	}
}
