package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestKilnLinksNoTesting pins docs/design.md's rule that the kiln binary links
// no package testing of its own making: no package of cmd/kiln's dependencies
// imports testing or testing/..., apart from the few outside kiln listed
// with their reason. The conformance
// kit's engine (pluginapi/conformance/kit) and the comparison (ir/verify) are
// what `kiln conformance`, `kiln run --verify` and `kiln tune` use;
// pluginapi/conformance, whose Run takes a *testing.T, must stay out.
func TestKilnLinksNoTesting(t *testing.T) {
	// testingImporters are the packages outside kiln that the kiln binary links
	// and that import package testing themselves, each with why it stays: the
	// test fails on any other, and on one of these once it stops importing it.
	testingImporters := map[string]string{
		// go-plugin's testing.go (TestConn, TestPluginGRPCConn) imports testing
		// in every release up to v1.8.0; the host runs plugins through go-plugin.
		"github.com/hashicorp/go-plugin": "go-plugin's exported test helpers (testing.go)",
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go tool on PATH to list cmd/kiln's dependencies: %v", err)
	}
	out, err := exec.Command(goTool, "list", "-deps", "-f", "{{.ImportPath}} {{join .Imports \" \"}}",
		"github.com/kiln-dev/kiln/cmd/kiln").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg, imports := fields[0], fields[1:]
		if pkg == "github.com/kiln-dev/kiln/pluginapi/conformance" {
			t.Errorf("cmd/kiln depends on %s (conformance.Run takes a *testing.T). Fix: import pluginapi/conformance/kit or ir/verify instead", pkg)
		}
		if strings.HasPrefix(pkg, "testing/") {
			t.Errorf("cmd/kiln depends on %s", pkg)
		}
		if !slices.Contains(imports, "testing") {
			continue
		}
		if _, ok := testingImporters[pkg]; ok {
			seen[pkg] = true
			continue
		}
		t.Errorf("%s imports package testing, so the kiln binary links it", pkg)
	}
	for pkg, why := range testingImporters {
		if !seen[pkg] {
			t.Errorf("%s (%s) no longer imports package testing as the kiln binary links it: drop it from testingImporters", pkg, why)
		}
	}
}
