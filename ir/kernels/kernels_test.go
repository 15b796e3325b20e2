package kernels

import (
	"bytes"
	"flag"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/ir"
)

var update = flag.Bool("update", false, "rewrite json/*.json from the builders")

func TestProgramsValidate(t *testing.T) {
	for _, k := range All() {
		p := k.Program()
		if err := ir.Validate(p); err != nil {
			t.Errorf("%s: %v", k.Name, err)
		}
		if p.Name != k.OpID {
			t.Errorf("%s: program name %q, want the op id %q", k.Name, p.Name, k.OpID)
		}
	}
}

func TestJSONFiles(t *testing.T) {
	for _, k := range All() {
		p := k.Program()
		data, err := ir.MarshalJSON(p)
		if err != nil {
			t.Fatalf("%s: MarshalJSON: %v", k.Name, err)
		}
		if *update {
			if err := os.WriteFile(filepath.FromSlash(jsonPath(k.OpID)), data, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		file, ok := JSON(k.Name)
		if !ok {
			t.Errorf("%s: no file %s. Fix: go test ./ir/kernels -update", k.Name, jsonPath(k.OpID))
			continue
		}
		if !bytes.Equal(file, data) {
			t.Errorf("%s: %s differs from MarshalJSON of the builder. Fix: go test ./ir/kernels -update", k.Name, jsonPath(k.OpID))
		}
		parsed, err := ir.ParseJSON(file)
		if err != nil {
			t.Errorf("%s: ParseJSON of %s: %v", k.Name, jsonPath(k.OpID), err)
			continue
		}
		if !reflect.DeepEqual(parsed, p) {
			t.Errorf("%s: ParseJSON of %s differs from the builder's program:\n got %+v\nwant %+v", k.Name, jsonPath(k.OpID), parsed, p)
		}
	}
}

func TestJSONFilesMatchCorpus(t *testing.T) {
	entries, err := jsonFiles.ReadDir("json")
	if err != nil {
		t.Fatal(err)
	}
	var files, want []string
	for _, e := range entries {
		files = append(files, e.Name())
	}
	for _, k := range All() {
		want = append(want, k.OpID+".json")
	}
	slices.Sort(want)
	if !slices.Equal(files, want) {
		t.Errorf("json/ holds %v, want exactly %v", files, want)
	}
	byName, _ := JSON("vector_add")
	byOpID, _ := JSON("kiln.vector.add.f32")
	if len(byName) == 0 || !bytes.Equal(byName, byOpID) {
		t.Errorf("JSON by name and by op id differ or are empty")
	}
	if _, ok := JSON("no_such_kernel"); ok {
		t.Errorf("JSON found an unknown kernel")
	}
}

func TestNamesUniqueAndDocumented(t *testing.T) {
	seen := map[string]string{}
	for _, k := range All() {
		for _, id := range []string{k.Name, k.OpID} {
			if prev, dup := seen[id]; dup {
				t.Errorf("%q is used by %s and %s", id, prev, k.Name)
			}
			seen[id] = k.Name
		}
		if !strings.HasPrefix(k.OpID, "kiln.") {
			t.Errorf("%s: op id %q is not under kiln.", k.Name, k.OpID)
		}
		if k.Doc == "" || strings.Contains(k.Doc, "\n") || !strings.Contains(k.Doc, "size") {
			t.Errorf("%s: Doc %q must be one line that says what size means", k.Name, k.Doc)
		}
		if k.Program == nil || k.NewCase == nil || k.Reference == nil || k.Check == nil {
			t.Errorf("%s: a function field is nil", k.Name)
		}
	}
	var names []string
	for _, k := range All() {
		names = append(names, k.Name)
	}
	wantOrder := []string{"vector_add", "saxpy", "reduce_sum", "dot", "histogram", "exclusive_scan", "transpose", "matmul", "matmul_reg", "collatz",
		"subgroup_sum", "scatter_add", "softmax", "vector_add_f16", "matmul_tc"}
	if !slices.Equal(names, wantOrder) {
		t.Errorf("All() order %v, want %v", names, wantOrder)
	}
}

func TestLookup(t *testing.T) {
	for _, k := range All() {
		for _, key := range []string{k.Name, k.OpID} {
			got, ok := Lookup(key)
			if !ok || got.Name != k.Name {
				t.Errorf("Lookup(%q) = %q, %v; want %q", key, got.Name, ok, k.Name)
			}
		}
	}
	for _, key := range []string{"", "nope", "VECTOR_ADD", "kiln.vector.add"} {
		if _, ok := Lookup(key); ok {
			t.Errorf("Lookup(%q) found a kernel", key)
		}
	}
}

// invocations is what a case must cover on each axis: the elements of the
// one-dimensional kernels, the columns and rows of the matrix kernels.
func invocations(k Kernel, c Case) [3]int {
	switch k.Name {
	case "transpose":
		return [3]int{c.Size + 3, c.Size, 1}
	case "matmul":
		return [3]int{c.Size + 2, c.Size, 1}
	case "matmul_reg": // a 4×4 block of c per invocation at the defaults
		return [3]int{(c.Size + 2 + 3) / 4, (c.Size + 3) / 4, 1}
	case "softmax":
		return [3]int{c.Size * 64, 1, 1} // one workgroup per row
	case "matmul_tc": // a workgroup of 128 per 64×128 tile of c at the defaults
		return [3]int{(c.Size + 127) / 128 * 128, (c.Size + 63) / 64, 1}
	case "vector_add": // four elements per invocation at the default epi
		return [3]int{(c.Size + 3) / 4, 1, 1}
	case "vector_add_f16": // eight elements per invocation at the default epi
		return [3]int{(c.Size + 7) / 8, 1, 1}
	}
	return [3]int{c.Size, 1, 1}
}

// inputLen is the element count a case of size n gives the input buffer.
func inputLen(k Kernel, n int, buffer string) int {
	switch {
	case k.Name == "transpose":
		return n * (n + 3)
	case k.Name == "matmul_tc":
		return n * n
	case strings.HasPrefix(k.Name, "matmul") && buffer == "a":
		return n * (n + 1)
	case strings.HasPrefix(k.Name, "matmul"):
		return (n + 1) * (n + 2)
	case k.Name == "softmax":
		return n * (2*n + 1)
	}
	return n
}

func TestCasesAreConsistent(t *testing.T) {
	for _, k := range All() {
		p := k.Program()
		wg := p.WorkgroupSize
		var multiple, ragged bool
		for _, size := range k.Sizes {
			n := invocations(k, Case{Size: size})
			if k.Name == "softmax" {
				n = [3]int{2*size + 1, 1, 1} // its lanes stride over a row's columns
			}
			for axis := range 2 {
				multiple = multiple || n[axis] > 0 && n[axis]%int(wg[axis]) == 0
				ragged = ragged || n[axis]%int(wg[axis]) != 0
			}
		}
		// matmul_tc's ragged edges are inside its tiles (bounded loads and
		// stores): its workgroups cover whole tiles.
		ragged = ragged || k.Name == "matmul_tc" && slices.ContainsFunc(k.Sizes, func(s int) bool { return s%64 != 0 })
		if !slices.Contains(k.Sizes, 0) || !slices.Contains(k.Sizes, 1) || !multiple || !ragged {
			t.Errorf("%s: Sizes %v must hold 0, 1, a multiple of the workgroup size %v on some axis, and a non-multiple",
				k.Name, k.Sizes, wg)
		}
		for _, size := range k.Sizes {
			c := k.NewCase(rand.New(rand.NewPCG(1, uint64(size))), size)
			if c.Size != size {
				t.Errorf("%s: NewCase(%d) made a case of size %d", k.Name, size, c.Size)
			}
			checkCase(t, k, p, c)
		}
	}
}

func checkCase(t *testing.T, k Kernel, p *ir.Program, c Case) {
	t.Helper()
	name := k.Name + "/" + strconv.Itoa(c.Size)
	if len(c.Inputs) != len(p.Buffers) || len(c.OutputCounts) != len(p.Buffers) {
		t.Fatalf("%s: %d inputs and %d output counts for %d buffers", name, len(c.Inputs), len(c.OutputCounts), len(p.Buffers))
	}
	if c.WorkgroupSize != ([3]uint32{}) {
		t.Errorf("%s: the case overrides the workgroup size to %v", name, c.WorkgroupSize)
	}
	wantSizes := map[string]int{}
	for _, b := range p.Buffers {
		in, count := c.Inputs[b.Binding], c.OutputCounts[b.Binding]
		size := int(b.Type.Size())
		switch {
		case b.Access.Readable() && (in == nil && c.Size > 0 || len(in)%size != 0):
			t.Errorf("%s: input %s has %d bytes", name, b.Name, len(in))
		case b.Access.Readable() && len(in) != size*inputLen(k, c.Size, b.Name):
			t.Errorf("%s: input %s has %d elements, want %d", name, b.Name, len(in)/size, inputLen(k, c.Size, b.Name))
		case !b.Access.Readable() && in != nil:
			t.Errorf("%s: write buffer %s has input data", name, b.Name)
		case b.Access != ir.Write && count != 0, b.Count != 0 && count != 0:
			t.Errorf("%s: buffer %s (%s, count %d) has output count %d", name, b.Name, b.Access, b.Count, count)
		}
		switch {
		case b.Access == ir.ReadWrite:
			wantSizes[b.Name] = len(in)
		case b.Access == ir.Write && b.Count != 0:
			wantSizes[b.Name] = size * int(b.Count)
		case b.Access == ir.Write:
			wantSizes[b.Name] = size * int(count)
		}
	}
	for _, name := range c.Spec.Names() {
		d, ok := p.Param(name)
		v, _ := c.Spec.Get(name)
		if l, isLit := v.Literal(); !ok || !isLit || l.Type != d.Type {
			t.Errorf("%s: spec %s = %v does not match a parameter of the program", k.Name, name, v)
		}
	}
	need := invocations(k, c)
	for axis := range 3 {
		covered := int(c.Grid[axis]) * int(p.WorkgroupSize[axis])
		if covered < need[axis] || need[axis] > 0 && covered-int(p.WorkgroupSize[axis]) >= need[axis] {
			t.Errorf("%s: grid %v of workgroups %v does not tightly cover %v invocations", name, c.Grid, p.WorkgroupSize, need)
		}
	}
	want := k.Reference(c)
	outs := p.Outputs()
	if len(want) != len(outs) {
		t.Fatalf("%s: reference returned %d outputs, the program has %d", name, len(want), len(outs))
	}
	for i, binding := range outs {
		b := p.Buffers[binding]
		if len(want[i]) != wantSizes[b.Name] {
			t.Errorf("%s: reference output %s has %d bytes, the dispatch gives %d", name, b.Name, len(want[i]), wantSizes[b.Name])
		}
	}
	if err := k.Check(want, want); err != nil {
		t.Errorf("%s: Check rejects the reference itself: %v", name, err)
	}
	checkDetects(t, k, p, name, want)
}

// checkDetects corrupts the last element of each non-empty output and expects
// Check to name the buffer and the index.
func checkDetects(t *testing.T, k Kernel, p *ir.Program, name string, want [][]byte) {
	t.Helper()
	for i, binding := range p.Outputs() {
		if len(want[i]) == 0 {
			continue
		}
		got := make([][]byte, len(want))
		copy(got, want)
		got[i] = slices.Clone(want[i])
		b := p.Buffers[binding]
		size := int(b.Type.Size())
		last := len(got[i]) - size
		// The top byte's bit 6: bit 30 of 32 (2^30 on integers, a factor 2^±128
		// or ±2 on f32), bit 14 of 16 (the top exponent bit of f16 and bf16).
		got[i][last+size-1] ^= 0x40
		err := k.Check(got, want)
		wantMsg := "output " + b.Name + "[" + strconv.Itoa(last/size) + "]"
		if err == nil || !strings.Contains(err.Error(), wantMsg) {
			t.Errorf("%s: Check of a corrupted %s returned %v, want an error naming %s", name, b.Name, err, wantMsg)
		}
	}
	if err := k.Check(want[:0], want); err == nil {
		t.Errorf("%s: Check accepted a missing output", name)
	}
}

func TestNewCaseIsDeterministic(t *testing.T) {
	for _, k := range All() {
		size := k.Sizes[len(k.Sizes)/2]
		a := k.NewCase(rand.New(rand.NewPCG(7, 7)), size)
		b := k.NewCase(rand.New(rand.NewPCG(7, 7)), size)
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%s: two cases from the same seed differ", k.Name)
		}
	}
}
