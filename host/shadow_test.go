package host

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/kiln-dev/kiln/internal/syncbuf"
)

// TestTwinPluginsHighestVersionThenPath pins issue 22 item 6: of plugins that
// report one id, the highest version wins, then the first path; each one
// shadowed says so, naming the winner, in its StartError, in Survey and in the
// log.
func TestTwinPluginsHighestVersionThenPath(t *testing.T) {
	var logs syncbuf.Buffer
	dir := pluginDir(t, "fx-aa-twin", "fx-zeros", "fx-zz-twin")
	h, err := Open(context.Background(), Options{PluginDir: dir, NoCache: true, NoAutotune: true, NoPGO: true,
		Logger: hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Warn})})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if got := strings.Join(h.IDs(), ","); got != "fx-zeros" {
		t.Fatalf("ids %s", got)
	}
	winner := filepath.Join(dir, PluginPrefix+"fx-zeros")
	if p := h.lookup("fx-zeros"); p.path != winner {
		t.Fatalf("fx-zeros is provided by %s (version %s), want %s: the highest version wins", p.path, p.desc.Version, winner)
	}
	rules := map[string]string{"fx-aa-twin": "the higher version wins", "fx-zz-twin": "of equal versions, the first path wins"}
	for _, s := range h.Report().Plugins {
		name := strings.TrimPrefix(filepath.Base(s.Path), PluginPrefix)
		rule, shadowed := rules[name]
		if !shadowed {
			continue
		}
		var se *StartError
		if !errors.As(s.Err, &se) || se.Stage != StartDuplicate || se.ShadowedBy != winner || !strings.Contains(s.Err.Error(), rule) || !strings.Contains(s.Err.Error(), "Fix: remove") {
			t.Errorf("%s: %v, want shadowed by %s because %s, with a Fix", name, s.Err, winner, rule)
		}
	}
	rows, err := h.Survey(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	statuses := map[string]string{}
	for _, r := range rows {
		statuses[r.ID] = r.Status
	}
	if statuses["fx-aa-twin"] != StatusShadowed || statuses["fx-zz-twin"] != StatusShadowed || statuses["fx-zeros"] != StatusReady {
		t.Errorf("survey statuses %v, want both twins shadowed and fx-zeros ready", statuses)
	}
	for name := range rules {
		if !strings.Contains(logs.String(), "plugin shadowed") || !strings.Contains(logs.String(), PluginPrefix+name) {
			t.Errorf("the log does not say %s was shadowed:\n%s", name, logs.String())
		}
	}
}

func TestCompareVersions(t *testing.T) {
	ordered := []string{"junk", "0.0.0-fixture", "0.0.1-fixture", "0.0.1", "1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta.2", "1.0.0-beta.11", "1.0.0-rc.1", "v1.0.0+build", "1.9", "1.10.0", "2"}
	for i, a := range ordered {
		for j, b := range ordered {
			want := 0
			switch {
			case i < j:
				want = -1
			case i > j:
				want = 1
			}
			if got := compareVersions(a, b); got != want {
				t.Errorf("compareVersions(%q, %q) = %d, want %d", a, b, got, want)
			}
		}
	}
	if compareVersions("1.0", "1.0.0") >= 0 || compareVersions("01.2", "1.2") != 0 || compareVersions("x", "y") != 0 {
		t.Error("prefix, leading zero or unparsed versions compare wrongly")
	}
}

func FuzzCompareVersions(f *testing.F) {
	for _, s := range []string{"1.0.0", "v2.1-rc.1", "0.0.1-fixture", "1..2", "-", "+", "1.0.0-a.01"} {
		f.Add(s, "1.0.0")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		if compareVersions(a, a) != 0 {
			t.Fatalf("%q differs from itself", a)
		}
		if ab, ba := compareVersions(a, b), compareVersions(b, a); ab != -ba {
			t.Fatalf("compareVersions(%q, %q) = %d but the reverse is %d", a, b, ab, ba)
		}
	})
}
