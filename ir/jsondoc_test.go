package ir

import (
	"bytes"
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// designJSONSection is the heading of the JSON reference in docs/design.md.
const designJSONSection = "### The JSON form: every spelling"

// designJSONBlocks returns the ```json blocks of docs/design.md's JSON
// reference section, in order.
func designJSONBlocks(t *testing.T) []string {
	t.Helper()
	doc, err := os.ReadFile("../docs/design.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n"+designJSONSection+"\n")
	if !ok {
		t.Fatalf("docs/design.md has no %q section", designJSONSection)
	}
	if end := regexp.MustCompile(`\n#{2,3} `).FindStringIndex(section); end != nil {
		section = section[:end[0]]
	}
	var blocks []string
	for _, m := range regexp.MustCompile("(?s)\n```json\n(.*?)\n```\n").FindAllStringSubmatch(section, -1) {
		blocks = append(blocks, m[1])
	}
	if len(blocks) == 0 {
		t.Fatalf("the %q section has no json blocks", designJSONSection)
	}
	return blocks
}

// helpKeys returns the node keys a decoder help string lists ("f32, u32, ...
// or an operator (neg, not, ...)"): its words that are node keys.
func helpKeys(help string) []string {
	var keys []string
	for _, w := range regexp.MustCompile(`[a-z0-9_]+`).FindAllString(help, -1) {
		_, e := exprShape(w)
		_, s := stmtShape(w)
		if (e || s) && !slices.Contains(keys, w) {
			keys = append(keys, w)
		}
	}
	return keys
}

// nodeKey returns the one key of v that names an expression or statement.
func nodeKey(t *testing.T, v jvalue) (key string, expr bool) {
	t.Helper()
	for _, m := range v.members {
		if _, ok := exprShape(m.key); ok {
			return m.key, true
		}
		if _, ok := stmtShape(m.key); ok {
			return m.key, false
		}
	}
	t.Fatalf("no node key in the object at byte %d", v.off)
	return "", false
}

// TestDesignJSONReference: every example of docs/design.md's JSON reference
// decodes with the ir JSON decoder (the program validates too), and the
// examples spell every expression and statement node, builtin and atomic
// operation the decoder knows, so the section cannot drift from the decoder.
func TestDesignJSONReference(t *testing.T) {
	seen := map[string]bool{}
	builtins := map[string]bool{}
	atomics := map[string]bool{}
	programs := 0
	for i, block := range designJSONBlocks(t) {
		data := []byte(block)
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		root, err := (&jreader{data: data, dec: dec}).value(0)
		if err != nil {
			t.Fatalf("block %d is not JSON: %v\n%s", i, err, block)
		}
		if root.kind == jObject {
			p, err := ParseJSON(data)
			if err != nil {
				t.Fatalf("block %d, a program: %v\n%s", i, err, block)
			}
			again, err := MarshalJSON(p)
			if err != nil {
				t.Fatal(err)
			}
			if q, err := ParseJSON(again); err != nil || q.Digest() != p.Digest() {
				t.Fatalf("block %d: the program does not survive MarshalJSON: %v", i, err)
			}
			programs++
			continue
		}
		if root.kind != jArray {
			t.Fatalf("block %d is %s; want a program or a list of nodes", i, root.kind)
		}
		w := &jwalker{data: data}
		for j, v := range root.elems {
			key, isExpr := nodeKey(t, v)
			if isExpr {
				_, err = w.expr(v, 0)
			} else {
				_, err = w.stmt(v, 0)
			}
			if err != nil {
				t.Errorf("block %d, example %d (%s): %v", i, j, key, err)
				continue
			}
			seen[key] = true
			for _, m := range v.members {
				switch {
				case key == "builtin" && m.key == key:
					builtins[m.val.text] = true
				case key == "atomic" && m.key == key:
					atomics[m.val.text] = true
				}
			}
		}
	}
	if programs != 1 {
		t.Errorf("%d whole programs in the section, want 1", programs)
	}
	keys := append(helpKeys(exprKeysHelp()), helpKeys(stmtKeysHelp())...)
	if len(keys) < 60 {
		t.Fatalf("the decoder's help lists only %d node keys: %v", len(keys), keys)
	}
	for _, k := range keys {
		if !seen[k] {
			t.Errorf("no example of %q in the section", k)
		}
	}
	for k := GlobalIDBuiltin; k < builtinEnd; k++ {
		if !builtins[k.String()] {
			t.Errorf("no example of builtin %q in the section", k)
		}
	}
	for _, op := range AtomicOps() {
		if !atomics[op.String()] {
			t.Errorf("no example of atomic %q in the section", op)
		}
	}
	for k := range seen {
		if !slices.Contains(keys, k) {
			t.Errorf("the section shows %q, which the decoder's help does not list", k)
		}
	}
}
