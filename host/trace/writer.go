package trace

import (
	"io"
	"strconv"
	"sync"
	"unicode/utf8"
)

// Arg is one entry of an event's args: a string or an integer.
type Arg struct {
	Key string
	Str string
	Int int64
	num bool
}

// String is a string arg.
func String(key, v string) Arg { return Arg{Key: key, Str: v} }

// Int is an integer arg.
func Int(key string, v int64) Arg { return Arg{Key: key, Int: v, num: true} }

// Track is where a slice lies: a process and one of its threads.
type Track struct{ Pid, Tid int }

// maxLanes bounds the threads ("lanes") of one process: a slice that
// overlaps the last slice of every lane of its process is dropped and
// counted (Writer.Dropped).
const maxLanes = 64

// flushBytes is how much the writer buffers before it writes.
const flushBytes = 64 << 10

// Writer streams a trace to an io.Writer: its memory is a buffer of
// flushBytes and one end time per lane, however long the trace runs. It is
// safe for concurrent use. Slices of one process go to lanes (threads) so
// that slices of one lane never overlap: a slice takes the first lane whose
// last slice ended before it began.
type Writer struct {
	mu      sync.Mutex
	w       io.Writer
	origin  int64 // the monotonic time written as ts 0
	buf     []byte
	started bool
	closed  bool
	err     error
	events  int
	dropped int
	lanes   map[int][]int64 // per process, each lane's last end
	names   map[int]string  // per process, the lanes' name
	flows   uint64
}

// NewWriter starts a trace on w whose ts 0 is the monotonic time origin.
func NewWriter(w io.Writer, origin int64) *Writer {
	return &Writer{w: w, origin: origin, buf: make([]byte, 0, flushBytes+4096), lanes: map[int][]int64{}, names: map[int]string{}}
}

// Process names process pid (the lanes of its slices are called lane, "lane
// 2", …) and orders it among the others (low first).
func (t *Writer) Process(pid int, name, lane string, sort int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.names[pid] = lane
	t.meta(pid, 0, "process_name", String("name", name))
	t.meta(pid, 0, "process_sort_index", Int("sort_index", int64(sort)))
}

// NewFlow returns a flow id no other flow of this trace has.
func (t *Writer) NewFlow() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.flows++
	return t.flows
}

// Span writes a complete slice of process pid from start to end (monotonic
// nanoseconds) and returns its track; ok is false when it was dropped (every
// lane busy, or the trace closed).
func (t *Writer) Span(pid int, name, cat string, start, end int64, args ...Arg) (tr Track, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return Track{}, false
	}
	start = max(start, t.origin)
	end = max(end, start)
	lanes := t.lanes[pid]
	tid := -1
	for i, last := range lanes {
		if last <= start {
			tid = i
			break
		}
	}
	if tid < 0 {
		if len(lanes) == maxLanes {
			t.dropped++
			return Track{}, false
		}
		tid = len(lanes)
		lanes = append(lanes, 0)
		t.lanes[pid] = lanes
		lane := t.names[pid]
		if lane == "" {
			lane = "lane"
		}
		if tid > 0 {
			lane += " " + strconv.Itoa(tid+1)
		}
		t.meta(pid, tid+1, "thread_name", String("name", lane))
		t.meta(pid, tid+1, "thread_sort_index", Int("sort_index", int64(tid)))
	}
	lanes[tid] = end
	tr = Track{Pid: pid, Tid: tid + 1}
	t.begin(name, cat, "X", tr, start)
	t.buf = append(t.buf, `,"dur":`...)
	t.buf = appendMicros(t.buf, end-start)
	t.args(args)
	t.end()
	return tr, true
}

// Flow writes one point of flow id: phase 's' starts it in the slice of tr
// that holds ts, 't' passes through one, 'f' ends it in one.
func (t *Writer) Flow(id uint64, phase byte, name string, tr Track, ts int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	t.begin(name, "flow", string(phase), tr, max(ts, t.origin))
	t.buf = append(t.buf, `,"id":`...)
	t.buf = strconv.AppendUint(t.buf, id, 10)
	if phase == 'f' {
		t.buf = append(t.buf, `,"bp":"e"`...)
	}
	t.end()
}

// Events is the number of events written so far (metadata included).
func (t *Writer) Events() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.events
}

// Dropped is the number of slices dropped because every lane was busy.
func (t *Writer) Dropped() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.dropped
}

// Flush writes what is buffered.
func (t *Writer) Flush() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.flush()
	return t.err
}

// Close ends the JSON document and flushes it; later events are dropped.
// It does not close the underlying writer.
func (t *Writer) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return t.err
	}
	t.closed = true
	t.open()
	t.buf = append(t.buf, "\n]}\n"...)
	t.flush()
	return t.err
}

func (t *Writer) meta(pid, tid int, name string, arg Arg) {
	t.begin(name, "", "M", Track{Pid: pid, Tid: tid}, t.origin)
	t.args([]Arg{arg})
	t.end()
}

// open writes the document's head once.
func (t *Writer) open() {
	if !t.started {
		t.started = true
		t.buf = append(t.buf, `{"displayTimeUnit":"ns","traceEvents":[`...)
	}
}

func (t *Writer) begin(name, cat, ph string, tr Track, ts int64) {
	t.open()
	if t.events > 0 {
		t.buf = append(t.buf, ',')
	}
	t.events++
	t.buf = append(t.buf, "\n{\"name\":"...)
	t.buf = appendString(t.buf, name)
	if cat != "" {
		t.buf = append(t.buf, `,"cat":`...)
		t.buf = appendString(t.buf, cat)
	}
	t.buf = append(t.buf, `,"ph":"`...)
	t.buf = append(t.buf, ph...)
	t.buf = append(t.buf, `","pid":`...)
	t.buf = strconv.AppendInt(t.buf, int64(tr.Pid), 10)
	t.buf = append(t.buf, `,"tid":`...)
	t.buf = strconv.AppendInt(t.buf, int64(tr.Tid), 10)
	t.buf = append(t.buf, `,"ts":`...)
	t.buf = appendMicros(t.buf, ts-t.origin)
}

func (t *Writer) args(args []Arg) {
	if len(args) == 0 {
		return
	}
	t.buf = append(t.buf, `,"args":{`...)
	for i, a := range args {
		if i > 0 {
			t.buf = append(t.buf, ',')
		}
		t.buf = appendString(t.buf, a.Key)
		t.buf = append(t.buf, ':')
		if a.num {
			t.buf = strconv.AppendInt(t.buf, a.Int, 10)
		} else {
			t.buf = appendString(t.buf, a.Str)
		}
	}
	t.buf = append(t.buf, '}')
}

func (t *Writer) end() {
	t.buf = append(t.buf, '}')
	if len(t.buf) >= flushBytes {
		t.flush()
	}
}

func (t *Writer) flush() {
	if len(t.buf) == 0 {
		return
	}
	if t.err == nil {
		_, t.err = t.w.Write(t.buf)
	}
	t.buf = t.buf[:0]
}

// appendMicros writes ns nanoseconds as microseconds with three decimals.
func appendMicros(b []byte, ns int64) []byte {
	if ns < 0 {
		b = append(b, '-')
		ns = -ns
	}
	b = strconv.AppendInt(b, ns/1000, 10)
	frac := ns % 1000
	b = append(b, '.', byte('0'+frac/100), byte('0'+frac/10%10), byte('0'+frac%10))
	return b
}

// appendString writes s as a JSON string; invalid UTF-8 becomes U+FFFD.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	plain := true
	for i := 0; i < len(s) && plain; i++ {
		c := s[i]
		plain = c >= 0x20 && c < utf8.RuneSelf && c != '"' && c != '\\'
	}
	if plain {
		b = append(b, '"')
		b = append(b, s...)
		return append(b, '"')
	}
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b = append(b, "\ufffd"...)
		} else {
			b = append(b, s[i:i+n]...)
		}
		i += n
	}
	return append(b, '"')
}
