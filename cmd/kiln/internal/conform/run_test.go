package conform

import (
	"slices"
	"strings"
	"testing"

	"github.com/kiln-dev/kiln/pluginapi/conformance/kit"
)

// tree runs body as the root of a run and returns the results by full name.
func tree(t *testing.T, f Filter, body func(kit.T)) (*Result, map[string]*Result, []string) {
	t.Helper()
	root := &node{filter: f, res: &Result{}}
	var order []string
	root.done = func(r *Result) { order = append(order, r.Name) }
	root.run(func(n *node) { body(n) })
	byName := map[string]*Result{}
	var walk func(*Result)
	walk = func(r *Result) {
		byName[r.Name] = r
		for _, c := range r.Children {
			walk(c)
		}
	}
	walk(root.res)
	return root.res, byName, order
}

// TestNodeBehavesAsTestingT pins what the kit relies on: Fatalf and Skipf end
// only their own subtest, Errorf goes on, a failure fails every parent,
// cleanups run last-added first after the subtest's body (their errors count),
// a panic is a failure, and names are go test's (spaces become underscores).
func TestNodeBehavesAsTestingT(t *testing.T) {
	var events []string
	root, got, order := tree(t, nil, func(t kit.T) {
		t.Run("part", func(t kit.T) {
			t.Cleanup(func() { events = append(events, "cleanup 1") })
			t.Cleanup(func() { events = append(events, "cleanup 2") })
			t.Run("fatal case", func(t kit.T) {
				t.Fatalf("stop %d", 1)
				events = append(events, "after Fatalf")
			})
			t.Run("error", func(t kit.T) {
				t.Errorf("first")
				t.Errorf("second")
				events = append(events, "after Errorf")
			})
			t.Run("skip", func(t kit.T) {
				t.Skipf("no %s", "device")
				events = append(events, "after Skipf")
			})
			t.Run("cleanup error", func(t kit.T) {
				t.Cleanup(func() { t.Errorf("release failed") })
			})
			t.Run("panic", func(t kit.T) { panic("boom") })
			events = append(events, "body end")
		})
		if ok := t.Run("passes", func(t kit.T) { t.Logf("note") }); !ok {
			events = append(events, "passes reported a failure")
		}
	})
	wantEvents := []string{"after Errorf", "body end", "cleanup 2", "cleanup 1"}
	if !slices.Equal(events, wantEvents) {
		t.Errorf("events %q, want %q", events, wantEvents)
	}
	for name, want := range map[string]string{
		"part/fatal_case": Fail, "part/error": Fail, "part/skip": Skip, "part/cleanup_error": Fail,
		"part/panic": Fail, "part": Fail, "passes": Pass, "": Fail,
	} {
		if r := got[name]; r == nil || r.Status != want {
			t.Errorf("%q: %+v, want status %s", name, r, want)
		}
	}
	if m := got["part/error"].Messages; !slices.Equal(m, []string{"first", "second"}) {
		t.Errorf("messages %q", m)
	}
	if m := got["part/panic"].Messages; len(m) != 1 || !strings.Contains(m[0], "panic: boom") {
		t.Errorf("panic messages %q", m)
	}
	if m := got["part/skip"].Messages; !slices.Equal(m, []string{"no device"}) {
		t.Errorf("skip messages %q", m)
	}
	if n := len(root.Leaves()); n != 6 {
		t.Errorf("%d leaves, want 6", n)
	}
	if order[0] != "part/fatal_case" || order[len(order)-1] != "" {
		t.Errorf("done order %q: children end before their parents", order)
	}
}

// TestFilterSelectsAsGoTestRun pins --run: one expression per level, deeper
// levels all run, and a subtest that does not match is not run at all.
func TestFilterSelectsAsGoTestRun(t *testing.T) {
	f, err := ParseFilter("semantics|vector_add/cast|size=7$")
	if err != nil {
		t.Fatal(err)
	}
	var ran []string
	_, got, _ := tree(t, f, func(t kit.T) {
		for _, part := range []string{"describe", "semantics", "vector_add"} {
			t.Run(part, func(t kit.T) {
				for _, sub := range []string{"cast", "operator", "size=7", "size=77"} {
					t.Run(sub, func(t kit.T) {
						t.Run("case", func(kit.T) { ran = append(ran, part+"/"+sub) })
					})
				}
			})
		}
	})
	want := []string{"semantics/cast", "semantics/size=7", "vector_add/cast", "vector_add/size=7"}
	if !slices.Equal(ran, want) {
		t.Errorf("ran %q, want %q", ran, want)
	}
	if got["describe"] != nil {
		t.Error("describe ran although --run does not select it")
	}
	if _, err := ParseFilter("semantics/("); err == nil || !strings.Contains(err.Error(), "Fix:") {
		t.Errorf("a bad pattern: %v", err)
	}
}
