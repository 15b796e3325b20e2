package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// The kiln binary (not only its tests, which link s3:// through remotetest)
// serves every fleet tier URL scheme: $KILN_REMOTE=gs://… keeps working for the
// CLI while an embedding application links only the drivers it imports.
func TestTheCLILinksEveryObjectStoreDriver(t *testing.T) {
	gotool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("the go tool is not on PATH (%v), so the CLI's dependencies cannot be listed", err)
	}
	out, err := exec.Command(gotool, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	for _, driver := range []string{"gocloud.dev/blob/s3blob", "gocloud.dev/blob/gcsblob", "gocloud.dev/blob/azureblob", "gocloud.dev/blob/fileblob"} {
		if !slices.Contains(deps, driver) {
			t.Errorf("the kiln binary does not link %s. Fix: import its remote/<store> package in cmd/kiln/drivers.go", driver)
		}
	}
}
