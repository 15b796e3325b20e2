package host

import (
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"testing"
)

// maxHostDeps bounds the packages an application that imports host links,
// standard library included (what `go list -deps ./host | wc -l` counts): 878
// while the object stores' drivers were built in, 422 without them. The floor
// is the plugin transport, not kiln: go-plugin alone links 345 packages (gRPC
// 304, net/http 185), and 220 of host's are the standard library's. The bound
// leaves room for small changes and catches a new dependency tree.
const maxHostDeps = 450

// cloudSDKs are the import path prefixes of the object stores' SDKs, which only
// the remote/s3, remote/gcs and remote/azure driver packages may link.
var cloudSDKs = []string{"github.com/aws", "cloud.google.com", "github.com/Azure", "google.golang.org/api/storage"}

// dep is one package host links.
type dep struct {
	path, module string // module is empty for the standard library
}

// hostDeps returns `go list -deps` of package host, skipping the test when the
// go tool is not there to ask.
func hostDeps(t *testing.T) []dep {
	t.Helper()
	gotool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("the go tool is not on PATH (%v), so host's dependencies cannot be listed", err)
	}
	out, err := exec.Command(gotool, "list", "-deps", "-f", "{{.ImportPath}} {{with .Module}}{{.Path}}{{end}}", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	var deps []dep
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, module, _ := strings.Cut(line, " ")
		deps = append(deps, dep{path, module})
	}
	return deps
}

func TestHostLinksNoCloudSDK(t *testing.T) {
	for _, d := range hostDeps(t) {
		for _, sdk := range cloudSDKs {
			if strings.HasPrefix(d.path, sdk) {
				t.Errorf("host links %s. Fix: leave object store drivers to the application's import of remote/s3, remote/gcs or remote/azure", d.path)
			}
		}
	}
}

func TestHostDependencyCount(t *testing.T) {
	deps := hostDeps(t)
	byModule := map[string]int{}
	for _, d := range deps {
		if d.module == "" {
			d.module = "std"
		}
		byModule[d.module]++
	}
	modules := make([]string, 0, len(byModule))
	for m := range byModule {
		modules = append(modules, m)
	}
	sort.Slice(modules, func(i, j int) bool { return byModule[modules[i]] > byModule[modules[j]] })
	var breakdown []string
	for _, m := range modules[:min(10, len(modules))] {
		breakdown = append(breakdown, fmt.Sprintf("%s %d", m, byModule[m]))
	}
	t.Logf("host links %d packages; by module: %s", len(deps), strings.Join(breakdown, ", "))
	if len(deps) > maxHostDeps {
		t.Fatalf("host links %d packages, over the budget of %d. Fix: find the new tree with go list -deps ./host and keep it out of host (an opt-in package, as remote/s3)", len(deps), maxHostDeps)
	}
}
