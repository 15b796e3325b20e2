package echoplugin

import (
	"context"
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	ServeIfAsked()
	os.Exit(m.Run())
}

// TestStart: the test binary, started as the echo plugin, answers Start.
func TestStart(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	d, err := Start(context.Background(), exe)
	if err != nil {
		t.Fatal(err)
	}
	if d <= 0 {
		t.Fatalf("start took %v", d)
	}
}
