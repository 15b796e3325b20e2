package trace

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
)

// File is a parsed trace: the JSON object form of the trace-event format (a
// bare array of events parses too).
type File struct {
	DisplayTimeUnit string  `json:"displayTimeUnit,omitempty"`
	TraceEvents     []Event `json:"traceEvents"`
}

// Event is one trace event. Ts and Dur are microseconds.
type Event struct {
	Name string         `json:"name"`
	Cat  string         `json:"cat,omitempty"`
	Ph   string         `json:"ph"`
	Pid  int            `json:"pid"`
	Tid  int            `json:"tid"`
	Ts   float64        `json:"ts"`
	Dur  *float64       `json:"dur,omitempty"`
	ID   *uint64        `json:"id,omitempty"`
	Bp   string         `json:"bp,omitempty"`
	Args map[string]any `json:"args,omitempty"`
}

// End is a complete event's end (Ts + Dur), in microseconds.
func (e *Event) End() float64 {
	if e.Dur == nil {
		return e.Ts
	}
	return e.Ts + *e.Dur
}

// Track is the event's track.
func (e *Event) Track() Track { return Track{Pid: e.Pid, Tid: e.Tid} }

// Parse reads a trace. It checks only that it is JSON of the trace-event
// format's shape; Check checks the events.
func Parse(r io.Reader) (*File, error) {
	br := bufio.NewReader(r)
	var first byte
	for {
		c, err := br.ReadByte()
		if err != nil {
			return nil, fmt.Errorf("trace: %w", err)
		}
		if c != ' ' && c != '\n' && c != '\r' && c != '\t' {
			first = c
			_ = br.UnreadByte()
			break
		}
	}
	dec := json.NewDecoder(br)
	f := &File{}
	var err error
	if first == '[' {
		err = dec.Decode(&f.TraceEvents)
	} else {
		err = dec.Decode(f)
	}
	if err != nil {
		return nil, fmt.Errorf("trace: not trace-event JSON: %w", err)
	}
	return f, nil
}

// ParseBytes parses a trace held in memory.
func ParseBytes(b []byte) (*File, error) { return Parse(bytes.NewReader(b)) }

// eps absorbs the rounding of microsecond decimals: a slice that ends where
// the next begins may print a hair past it.
const eps = 1e-6

// maxProblems bounds the problems Check reports.
const maxProblems = 20

// Check checks the events against the trace-event format and against what
// this package writes: known phases; finite, non-negative times; a duration
// on every complete event; slices of one thread nested, never partly
// overlapping; metadata that names something; every flow with an id and a
// category, started once, its points in time order, each point inside a
// slice of its thread.
func (f *File) Check() error {
	var problems []error
	bad := func(i int, format string, args ...any) {
		if len(problems) < maxProblems {
			problems = append(problems, fmt.Errorf("event %d: %s", i, fmt.Sprintf(format, args...)))
		}
	}
	slices := map[Track][]int{}
	flows := map[string][]int{}
	for i := range f.TraceEvents {
		e := &f.TraceEvents[i]
		if math.IsNaN(e.Ts) || math.IsInf(e.Ts, 0) || e.Ts < 0 {
			bad(i, "ts %v", e.Ts)
			continue
		}
		switch e.Ph {
		case "X":
			if e.Dur == nil || math.IsNaN(*e.Dur) || math.IsInf(*e.Dur, 0) || *e.Dur < 0 {
				bad(i, "complete event %q without a non-negative dur", e.Name)
				continue
			}
			slices[e.Track()] = append(slices[e.Track()], i)
		case "s", "t", "f":
			if e.ID == nil || e.Cat == "" {
				bad(i, "flow event %q without an id or a cat", e.Name)
				continue
			}
			if e.Bp != "" && e.Bp != "e" {
				bad(i, "flow event with bp %q", e.Bp)
			}
			key := fmt.Sprintf("%s/%d", e.Cat, *e.ID)
			flows[key] = append(flows[key], i)
		case "M":
			switch e.Name {
			case "process_name", "thread_name", "process_labels", "process_sort_index", "thread_sort_index":
			default:
				bad(i, "metadata event %q", e.Name)
			}
			if len(e.Args) == 0 {
				bad(i, "metadata event %q without args", e.Name)
			}
		case "B", "E", "i", "I", "C", "b", "n", "e", "P", "O", "N", "D", "R":
		default:
			bad(i, "unknown phase %q", e.Ph)
		}
	}
	// Slices of one thread nest: sorted by start (longest first on a tie),
	// each lies inside the open one or after it.
	for tr, idx := range slices {
		sort.SliceStable(idx, func(a, b int) bool {
			ea, eb := &f.TraceEvents[idx[a]], &f.TraceEvents[idx[b]]
			if ea.Ts != eb.Ts {
				return ea.Ts < eb.Ts
			}
			return ea.End() > eb.End()
		})
		var open []int
		for _, i := range idx {
			e := &f.TraceEvents[i]
			for len(open) > 0 && f.TraceEvents[open[len(open)-1]].End() <= e.Ts+eps {
				open = open[:len(open)-1]
			}
			if len(open) > 0 && e.End() > f.TraceEvents[open[len(open)-1]].End()+eps {
				o := &f.TraceEvents[open[len(open)-1]]
				bad(i, "slice %q [%.3f, %.3f] on pid %d tid %d partly overlaps %q [%.3f, %.3f]", e.Name, e.Ts, e.End(), tr.Pid, tr.Tid, o.Name, o.Ts, o.End())
			}
			open = append(open, i)
		}
		slices[tr] = idx
	}
	within := func(e *Event) bool {
		for _, j := range slices[e.Track()] {
			s := &f.TraceEvents[j]
			if s.Ts > e.Ts+eps {
				break // sorted by start
			}
			if e.Ts <= s.End()+eps {
				return true
			}
		}
		return false
	}
	keys := make([]string, 0, len(flows))
	for k := range flows {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		idx := flows[k]
		starts, ends := 0, 0
		last := math.Inf(-1)
		for n, i := range idx {
			e := &f.TraceEvents[i]
			switch e.Ph {
			case "s":
				starts++
				if n != 0 {
					bad(i, "flow %s starts after its other points", k)
				}
			case "f":
				ends++
				if n != len(idx)-1 {
					bad(i, "flow %s ends before its other points", k)
				}
			}
			if e.Ts+eps < last {
				bad(i, "flow %s goes back in time (%.3f after %.3f)", k, e.Ts, last)
			}
			last = e.Ts
			if !within(e) {
				bad(i, "flow %s point at %.3f lies in no slice of pid %d tid %d", k, e.Ts, e.Pid, e.Tid)
			}
		}
		if starts != 1 || ends > 1 {
			bad(idx[0], "flow %s has %d starts and %d ends", k, starts, ends)
		}
	}
	return errors.Join(problems...)
}

// Flow is one flow of a trace: its points in order, each with the slice of
// its thread that holds it (nil when none does).
type Flow struct {
	Cat    string
	ID     uint64
	Points []*Event
	Slices []*Event
}

// Flows returns the trace's flows, in the order their first points appear.
func (f *File) Flows() []Flow {
	slices := map[Track][]*Event{}
	for i := range f.TraceEvents {
		if e := &f.TraceEvents[i]; e.Ph == "X" && e.Dur != nil {
			slices[e.Track()] = append(slices[e.Track()], e)
		}
	}
	for _, list := range slices {
		sort.Slice(list, func(i, j int) bool { return list[i].Ts < list[j].Ts })
	}
	// holder is the latest-starting slice of p's thread that holds p: the
	// search starts at the last slice starting no later than p and walks
	// back a bounded way (lanes hold few nested slices).
	holder := func(p *Event) *Event {
		list := slices[p.Track()]
		i := sort.Search(len(list), func(i int) bool { return list[i].Ts > p.Ts+eps })
		for j := i - 1; j >= 0 && j >= i-64; j-- {
			if p.Ts <= list[j].End()+eps {
				return list[j]
			}
		}
		return nil
	}
	type key struct {
		cat string
		id  uint64
	}
	at := map[key]int{}
	var flows []Flow
	for i := range f.TraceEvents {
		e := &f.TraceEvents[i]
		if (e.Ph != "s" && e.Ph != "t" && e.Ph != "f") || e.ID == nil {
			continue
		}
		k := key{e.Cat, *e.ID}
		n, ok := at[k]
		if !ok {
			n = len(flows)
			at[k] = n
			flows = append(flows, Flow{Cat: e.Cat, ID: *e.ID})
		}
		flows[n].Points = append(flows[n].Points, e)
		flows[n].Slices = append(flows[n].Slices, holder(e))
	}
	return flows
}

// ProcessNames maps each named process id to its name.
func (f *File) ProcessNames() map[int]string {
	names := map[int]string{}
	for _, e := range f.TraceEvents {
		if e.Ph == "M" && e.Name == "process_name" {
			if n, ok := e.Args["name"].(string); ok {
				names[e.Pid] = n
			}
		}
	}
	return names
}
