package host

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
)

// stderrTail keeps the end of a plugin's stderr, the last panic or fatal-error
// line and the last error-level log line, so that a crash report can say why
// the process died rather than quote go-plugin's chatter (its INFO line about
// mTLS is often the last thing a plugin writes).
type stderrTail struct {
	mu  sync.Mutex
	buf []byte // every line
	// notable holds the lines that are not log lines below the warning level.
	notable   []byte
	panic     string
	lastError string // the last error-level log line, as readable text
	line      []byte // the line being written; go-plugin writes a line, then "\n"
}

// tailLimit bounds the bytes of stderr kept per process (in each buffer).
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
		level, line := parseLogLine(strings.TrimSpace(string(t.line)))
		t.line = t.line[:0]
		if strings.HasPrefix(line, "panic: ") || strings.HasPrefix(line, "fatal error: ") {
			t.panic = line
		}
		if line == "" {
			continue
		}
		t.buf = appendLine(t.buf, line)
		switch level {
		case "error", "fatal":
			t.lastError = line
		}
		switch level {
		case "trace", "debug", "info":
		default:
			t.notable = appendLine(t.notable, line)
		}
	}
	return len(p), nil
}

// appendLine appends line and a newline to buf, keeping its last tailLimit bytes.
func appendLine(buf []byte, line string) []byte {
	buf = append(buf, line...)
	buf = append(buf, '\n')
	if over := len(buf) - tailLimit; over > 0 {
		buf = buf[over:]
	}
	return buf
}

// parseLogLine returns the hclog level of a line (lower case; "" when it is no
// log line) and its readable text: a JSON log line's message (with its error
// field, when it has one); other lines as they are. hclog's text form
// ("2026-05-02T10:00:00.000Z [ERROR] name: message") gives its level too.
func parseLogLine(line string) (level, text string) {
	if strings.HasPrefix(line, "{") {
		var entry struct {
			Level   string `json:"@level"`
			Message string `json:"@message"`
			Error   any    `json:"error"`
		}
		if json.Unmarshal([]byte(line), &entry) == nil && entry.Message != "" {
			text = entry.Message
			if s, ok := entry.Error.(string); ok && s != "" {
				text += ": " + s
			}
			return strings.ToLower(entry.Level), text
		}
		return "", line
	}
	if open := strings.IndexByte(line, '['); open >= 0 {
		if end := strings.IndexByte(line[open:], ']'); end > 1 {
			switch l := strings.ToLower(strings.TrimSpace(line[open+1 : open+end])); l {
			case "trace", "debug", "info", "warn", "error":
				return l, line
			}
		}
	}
	return "", line
}

// summaryLines and summaryWidth bound what summary returns.
const (
	summaryLines = 3
	summaryWidth = 240
)

// summary says why the process died, from the best evidence it wrote: the last
// panic line if there was one; else the last error-level log line; else the
// last few lines (a message is often wrapped over several), joined by " / ",
// leaving out log lines below the warning level unless nothing else is left.
func (t *stderrTail) summary() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.panic != "":
		return t.panic
	case t.lastError != "":
		return cut(t.lastError)
	}
	buf := t.notable
	if len(buf) == 0 {
		buf = t.buf
	}
	lines := strings.Split(string(bytes.TrimRight(buf, "\n")), "\n")
	if partial := strings.TrimSpace(string(t.line)); partial != "" {
		lines = append(lines, partial)
	}
	if len(lines) > summaryLines {
		lines = lines[len(lines)-summaryLines:]
	}
	for i, l := range lines {
		lines[i] = cut(l)
	}
	return strings.Trim(strings.Join(lines, " / "), " /")
}

// cut shortens a line to summaryWidth bytes.
func cut(l string) string {
	if len(l) > summaryWidth {
		return l[:summaryWidth] + "…"
	}
	return l
}
