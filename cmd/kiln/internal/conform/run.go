package conform

import (
	"fmt"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/kiln-dev/kiln/pluginapi"
	"github.com/kiln-dev/kiln/pluginapi/conformance/kit"
)

// The outcomes of a case.
const (
	Pass = "pass"
	Fail = "fail"
	Skip = "skip"
)

// Result is the outcome of one (sub)test of the kit.
type Result struct {
	// Name is the full name, as go test would print it under the test:
	// "semantics/cast/f32.i32" (spaces become underscores).
	Name string
	// Status is Pass, Fail or Skip. A test fails when it or a subtest failed.
	Status string
	// Messages are what the kit reported: errors, the reason of a skip, logs.
	Messages []string
	Elapsed  time.Duration
	Children []*Result
}

// Leaves returns the cases under r: the results without subtests (r itself
// when it has none).
func (r *Result) Leaves() []*Result {
	if len(r.Children) == 0 {
		return []*Result{r}
	}
	var out []*Result
	for _, c := range r.Children {
		out = append(out, c.Leaves()...)
	}
	return out
}

// Filter selects subtests as go test -run does: the pattern is split at each
// '/' into one regular expression per level, a subtest runs when its name
// matches its level's expression, and levels below the pattern's all run.
type Filter []*regexp.Regexp

// ParseFilter compiles a -run pattern; "" selects everything.
func ParseFilter(pattern string) (Filter, error) {
	if pattern == "" {
		return nil, nil
	}
	var f Filter
	for _, part := range strings.Split(pattern, "/") {
		re, err := regexp.Compile(part)
		if err != nil {
			return nil, fmt.Errorf("--run %q: %w. Fix: give a regular expression per level, separated by '/', as go test -run takes", pattern, err)
		}
		f = append(f, re)
	}
	return f, nil
}

func (f Filter) match(depth int, name string) bool {
	return depth >= len(f) || f[depth].MatchString(name)
}

// Run runs the kit (kit.Check) on b with opts, the subtests f
// selects, and returns the root result: its children are the kit's parts
// ("describe", "contract", "semantics", one per corpus kernel) and its own
// messages say why the kit stopped early (a failed Describe, an unavailable
// adapter). done, when set, is called as each (sub)test ends, one call at a
// time (subtests run one after another).
func Run(b pluginapi.Backend, opts kit.Options, f Filter, done func(*Result)) *Result {
	root := &node{filter: f, done: done, res: &Result{}}
	root.run(func(t *node) { kit.Check(t, b, opts) })
	return root.res
}

// node is the kit's kit.T for one (sub)test.
type node struct {
	filter Filter
	depth  int
	done   func(*Result)

	mu       sync.Mutex
	res      *Result
	failed   bool
	skipped  bool
	cleanups []func()
}

var _ kit.T = (*node)(nil)

// run runs body as this test on a goroutine of its own (so that Fatalf and
// Skipf can end it with runtime.Goexit, as package testing does), then its
// cleanups, and records the outcome.
func (n *node) run(body func(*node)) {
	began := time.Now()
	n.guarded(func() { body(n) })
	n.mu.Lock()
	cleanups := n.cleanups
	n.cleanups = nil
	n.mu.Unlock()
	for i := len(cleanups) - 1; i >= 0; i-- {
		n.guarded(cleanups[i])
	}
	n.mu.Lock()
	n.res.Elapsed = time.Since(began)
	switch {
	case n.failed:
		n.res.Status = Fail
	case n.skipped:
		n.res.Status = Skip
	default:
		n.res.Status = Pass
	}
	res := n.res
	n.mu.Unlock()
	if n.done != nil {
		n.done(res)
	}
}

// guarded runs fn on a goroutine of its own and waits for it; a panic fails
// the test with its value instead of ending the program.
func (n *node) guarded(fn func()) {
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		defer func() {
			if p := recover(); p != nil {
				n.report(true, fmt.Sprintf("panic: %v", p))
			}
		}()
		fn()
	}()
	<-ended
}

func (n *node) report(fail bool, msg string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.res.Messages = append(n.res.Messages, msg)
	n.failed = n.failed || fail
}

// Helper does nothing: messages carry no file and line.
func (n *node) Helper() {}

// Logf records a message.
func (n *node) Logf(format string, args ...any) { n.report(false, fmt.Sprintf(format, args...)) }

// Errorf records a failure and goes on.
func (n *node) Errorf(format string, args ...any) { n.report(true, fmt.Sprintf(format, args...)) }

// Fatalf records a failure and ends the test.
func (n *node) Fatalf(format string, args ...any) {
	n.report(true, fmt.Sprintf(format, args...))
	runtime.Goexit()
}

// Skipf records why the test is skipped and ends it.
func (n *node) Skipf(format string, args ...any) {
	n.report(false, fmt.Sprintf(format, args...))
	n.mu.Lock()
	n.skipped = true
	n.mu.Unlock()
	runtime.Goexit()
}

// Cleanup registers f to run when the test ends.
func (n *node) Cleanup(f func()) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.cleanups = append(n.cleanups, f)
}

// Run runs f as the subtest name when the filter selects it, and reports
// whether it passed or was skipped (true, as go test, when it did not run).
func (n *node) Run(name string, f func(t kit.T)) bool {
	name = strings.ReplaceAll(name, " ", "_")
	if !n.filter.match(n.depth, name) {
		return true
	}
	full := name
	if n.res.Name != "" {
		full = n.res.Name + "/" + name
	}
	child := &node{filter: n.filter, depth: n.depth + 1, done: n.done, res: &Result{Name: full}}
	child.run(func(t *node) { f(t) })
	n.mu.Lock()
	defer n.mu.Unlock()
	n.res.Children = append(n.res.Children, child.res)
	if child.res.Status == Fail {
		n.failed = true
	}
	return child.res.Status != Fail
}
