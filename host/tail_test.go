package host

import (
	"strings"
	"testing"
)

func TestStderrTail(t *testing.T) {
	var tail stderrTail
	if tail.summary() != "" {
		t.Fatal("empty tail must summarize to nothing")
	}
	for _, chunk := range []string{"starting", "\n", "panic: boom", "\n", "\ngoroutine 1 [running]:\n", "main.main()", "\n"} {
		if _, err := tail.Write([]byte(chunk)); err != nil {
			t.Fatal(err)
		}
	}
	if got := tail.summary(); got != "panic: boom" {
		t.Fatalf("summary %q, want the panic line", got)
	}
	var plain stderrTail
	if _, err := plain.Write([]byte("one\ntwo\n" + strings.Repeat("x", 3*tailLimit) + "\nlast line\n")); err != nil {
		t.Fatal(err)
	}
	if got := plain.summary(); !strings.HasPrefix(got, "xxx") || !strings.HasSuffix(got, "x… / last line") {
		t.Fatalf("summary %q, want the last lines, the long one cut", got)
	}
	var wrapped stderrTail
	if _, err := wrapped.Write([]byte("one\ntwo\nthree\nfour\npartial")); err != nil {
		t.Fatal(err)
	}
	if got := wrapped.summary(); got != "three / four / partial" {
		t.Fatalf("summary %q, want the last three lines", got)
	}
	if len(plain.buf) > tailLimit {
		t.Fatalf("tail keeps %d bytes, limit %d", len(plain.buf), tailLimit)
	}
}
