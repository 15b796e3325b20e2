package host

import (
	"bufio"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

func TestLineLimiterAllowsTheBurstThenDrops(t *testing.T) {
	l := newLineLimiter(10, hclog.NewNullLogger())
	allowed := 0
	for range 1000 {
		if l.allow() {
			allowed++
		}
	}
	// 100 lines of burst, and at most a few more refilled meanwhile.
	if allowed < 100 || allowed > 110 || l.dropped.Load() != uint64(1000-allowed) {
		t.Fatalf("allowed %d, dropped %d of 1000 at 10 lines/s", allowed, l.dropped.Load())
	}
}

func TestLimitedWriterSplitsLinesAndBoundsThem(t *testing.T) {
	var out strings.Builder
	lw := &limitedWriter{w: &out, limit: newLineLimiter(1000, hclog.NewNullLogger())}
	lw.Write([]byte("one\ntw"))
	lw.Write([]byte("o\n" + strings.Repeat("x", 2*maxLineBytes) + "\nthree"))
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 3 || lines[0] != "one" || lines[1] != "two" || len(lines[2]) != maxLineBytes {
		t.Fatalf("lines %q…", lines[:min(2, len(lines))])
	}
}

func TestReadLineBoundsLongLines(t *testing.T) {
	long := strings.Repeat("y", 3*maxLineBytes)
	br := bufio.NewReaderSize(strings.NewReader(long+"\nshort\n"), 4096)
	line, err := readLine(br)
	if err != nil || len(line) != maxLineBytes {
		t.Fatalf("%d bytes, %v", len(line), err)
	}
	if line, err := readLine(br); err != nil || string(line) != "short" {
		t.Fatalf("%q, %v", line, err)
	}
}

func TestTailTurnsHclogJSONIntoItsMessage(t *testing.T) {
	var tail stderrTail
	tail.Write([]byte(`{"@level":"error","@message":"device lost","@timestamp":"x"}` + "\n"))
	if got := tail.summary(); got != "device lost" {
		t.Fatalf("summary %q", got)
	}
}

func TestHandshakeStage(t *testing.T) {
	for _, tc := range []struct {
		line    string
		got     bool
		exited  bool
		want    StartStage
		details string
	}{
		{"", false, true, StartExited, ""},
		{"", false, false, StartHung, ""},
		{"hello", true, false, StartBadHandshake, "hello"},
		{"1|99|unix|/s|grpc", true, false, StartProtocol, "kiln protocol version 99"},
		{"7|1|unix|/s|grpc", true, false, StartProtocol, "core protocol 7"},
		{"1|1|unix|/s|grpc", true, false, StartBadHandshake, ""},
	} {
		stage, detail := handshakeStage(tc.line, tc.got, tc.exited)
		if stage != tc.want || !strings.Contains(detail, tc.details) {
			t.Errorf("%q: %s %q, want %s %q", tc.line, stage, detail, tc.want, tc.details)
		}
	}
}

func FuzzHandshakeStage(f *testing.F) {
	f.Add("1|1|unix|/tmp/plugin|grpc|cert")
	f.Add("junk")
	f.Fuzz(func(t *testing.T, line string) {
		stage, _ := handshakeStage(line, true, false)
		if stage == "" {
			t.Fatal("no stage")
		}
		if (&StartError{Stage: stage, Detail: line}).Error() == "" {
			t.Fatal("empty message")
		}
	})
}
