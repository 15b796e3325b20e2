package host

import (
	"bytes"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Default log rate limit of one plugin: lines per second, and the burst a
// quiet plugin may write at once (a panic's goroutine dump fits).
const (
	defaultLogLinesPerSecond = 100
	logBurstSeconds          = 10
)

// lineLimiter is a token bucket over one plugin's log lines (its stderr and its
// stdio stream share it): lines over the rate are dropped and counted, and a
// warning with the count is logged within a second of the first drop. See
// docs/design.md, "Plugin trust and operation".
type lineLimiter struct {
	rate, burst float64
	log         hclog.Logger

	mu      sync.Mutex
	tokens  float64
	last    time.Time
	pending uint64 // dropped since the last warning
	timer   *time.Timer

	dropped atomic.Uint64 // dropped over the limiter's life
}

// dropReportDelay is how long after a drop its warning is logged, so that one
// warning counts a whole flood.
const dropReportDelay = time.Second

// newLineLimiter allows perSecond lines a second with a burst of
// logBurstSeconds' worth; drop warnings go to log.
func newLineLimiter(perSecond int, log hclog.Logger) *lineLimiter {
	rate := float64(max(perSecond, 1))
	burst := rate * logBurstSeconds
	return &lineLimiter{rate: rate, burst: burst, tokens: burst, log: log}
}

// allow reports whether one more line may pass.
func (l *lineLimiter) allow() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if !l.last.IsZero() {
		l.tokens = min(l.burst, l.tokens+now.Sub(l.last).Seconds()*l.rate)
	}
	l.last = now
	if l.tokens >= 1 {
		l.tokens--
		return true
	}
	l.pending++
	l.dropped.Add(1)
	if l.timer == nil {
		l.timer = time.AfterFunc(dropReportDelay, l.flush)
	}
	return false
}

// flush logs the lines dropped since the last warning, if any.
func (l *lineLimiter) flush() {
	l.mu.Lock()
	pending := l.pending
	l.pending, l.timer = 0, nil
	l.mu.Unlock()
	if pending > 0 {
		l.log.Warn("plugin log lines dropped by the rate limit", "dropped", pending, "total_dropped", l.dropped.Load())
	}
}

// limitedWriter splits what is written into lines and passes on those the
// limiter allows, one Write per line. A partial line waits for its end (up to
// maxLineBytes).
type limitedWriter struct {
	w     io.Writer
	limit *lineLimiter

	mu   sync.Mutex
	part []byte
}

func (lw *limitedWriter) Write(p []byte) (int, error) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	data := p
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			room := maxLineBytes - len(lw.part)
			lw.part = append(lw.part, data[:max(0, min(len(data), room))]...)
			break
		}
		room := maxLineBytes - len(lw.part)
		line := append(lw.part, data[:max(0, min(i, room))]...)
		lw.part = nil
		data = data[i+1:]
		if lw.limit.allow() {
			if _, err := lw.w.Write(append(line, '\n')); err != nil {
				return len(p), nil // the log sink failing never fails the plugin's stream
			}
		}
	}
	return len(p), nil
}
