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

// The summary prefers the last error-level log line (hclog's JSON or text
// form) to whatever came after it, and leaves info lines out of the last lines
// unless nothing else is left.
func TestStderrTailPrefersTheLastErrorLine(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"json error with its error field", `{"@level":"error","@message":"opening device","error":"no such file"}` + "\n" +
			`{"@level":"info","@message":"configuring server automatic mTLS"}` + "\n", "opening device: no such file"},
		{"text error", "2026-05-02T10:00:00.000Z [ERROR] plugin: lost the queue\n2026-05-02T10:00:00.001Z [INFO]  plugin: exiting\n",
			"2026-05-02T10:00:00.000Z [ERROR] plugin: lost the queue"},
		{"info after a plain line", "fixture: giving up\n" + `{"@level":"info","@message":"configuring server automatic mTLS"}` + "\n", "fixture: giving up"},
		{"only info", `{"@level":"info","@message":"configuring server automatic mTLS"}` + "\n", "configuring server automatic mTLS"},
		{"warn kept", `{"@level":"warn","@message":"slow device"}` + "\n" + `{"@level":"debug","@message":"detail"}` + "\n", "slow device"},
	} {
		var tail stderrTail
		if _, err := tail.Write([]byte(c.in)); err != nil {
			t.Fatal(err)
		}
		if got := tail.summary(); got != c.want {
			t.Errorf("%s: summary %q, want %q", c.name, got, c.want)
		}
	}
}

// FuzzParseLogLine: any stderr line gives a readable text (non-empty for a
// non-empty line) without panicking, and the summary stays bounded.
func FuzzParseLogLine(f *testing.F) {
	for _, s := range []string{`{"@level":"error","@message":"m","error":"e"}`, `{"@message":1}`, "x [ERROR] y", "[", "[]", "{", `{"error":{}}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		_, text := parseLogLine(line)
		if line != "" && text == "" {
			t.Fatalf("line %q gave no text", line)
		}
		var tail stderrTail
		_, _ = tail.Write([]byte(line + "\n"))
		if got := tail.summary(); len(got) > summaryLines*(summaryWidth+len("… / ")) {
			t.Fatalf("summary of %d bytes", len(got))
		}
	})
}
