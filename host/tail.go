package host

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
)

// stderrTail keeps the end of a plugin's stderr, and the last panic or fatal-error
// line, so that a crash report can say why the process died.
type stderrTail struct {
	mu    sync.Mutex
	buf   []byte
	panic string
	line  []byte // the line being written; go-plugin writes a line, then "\n"
}

// tailLimit bounds the bytes of stderr kept per process.
const tailLimit = 8 << 10

func (t *stderrTail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, b := range p {
		if b != '\n' {
			if len(t.line) < tailLimit {
				t.line = append(t.line, b)
			}
			continue
		}
		line := readable(strings.TrimSpace(string(t.line)))
		t.line = t.line[:0]
		if strings.HasPrefix(line, "panic: ") || strings.HasPrefix(line, "fatal error: ") {
			t.panic = line
		}
		if line == "" {
			continue
		}
		t.buf = append(t.buf, line...)
		t.buf = append(t.buf, '\n')
		if over := len(t.buf) - tailLimit; over > 0 {
			t.buf = t.buf[over:]
		}
	}
	return len(p), nil
}

// readable turns a plugin's hclog JSON line into its message; other lines
// stay as they are.
func readable(line string) string {
	if !strings.HasPrefix(line, "{") {
		return line
	}
	var entry struct {
		Message string `json:"@message"`
	}
	if json.Unmarshal([]byte(line), &entry) != nil || entry.Message == "" {
		return line
	}
	return entry.Message
}

// summaryLines and summaryWidth bound what summary returns.
const (
	summaryLines = 3
	summaryWidth = 240
)

// summary returns the last panic line if there was one, else the last few lines
// (a message is often wrapped over several), joined by " / ".
func (t *stderrTail) summary() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.panic != "" {
		return t.panic
	}
	lines := strings.Split(string(bytes.TrimRight(t.buf, "\n")), "\n")
	if partial := strings.TrimSpace(string(t.line)); partial != "" {
		lines = append(lines, partial)
	}
	if len(lines) > summaryLines {
		lines = lines[len(lines)-summaryLines:]
	}
	for i, l := range lines {
		if len(l) > summaryWidth {
			lines[i] = l[:summaryWidth] + "…"
		}
	}
	return strings.Trim(strings.Join(lines, " / "), " /")
}
