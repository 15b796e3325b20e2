package trace

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
)

// TrackTotal is the time one process's slices of one name add up to.
type TrackTotal struct {
	Process string  // the process's name (or "pid N")
	Name    string  // the slices' name
	Count   int     // how many
	TotalUs float64 // their summed duration, microseconds
	MaxUs   float64 // the longest, microseconds
}

// Summary is what `kiln trace summary` prints: per process and slice name,
// the count and total and longest duration; the longest slices; the flows.
type Summary struct {
	SpanUs  float64 // from the first event to the last end, microseconds
	Events  int
	Flows   int
	Totals  []TrackTotal // by process order, then total time (high first)
	Longest []Event      // the longest slices, longest first
}

// Summarize summarizes f, keeping the top longest slices.
func Summarize(f *File, top int) *Summary {
	s := &Summary{Events: len(f.TraceEvents), Flows: len(f.Flows())}
	names := f.ProcessNames()
	order := processOrder(f)
	type key struct {
		pid  int
		name string
	}
	totals := map[key]*TrackTotal{}
	var slices []Event
	first, last := 0.0, 0.0
	seen := false
	for _, e := range f.TraceEvents {
		if e.Ph != "X" || e.Dur == nil {
			continue
		}
		if !seen || e.Ts < first {
			first = e.Ts
		}
		if !seen || e.End() > last {
			last = e.End()
		}
		seen = true
		k := key{e.Pid, e.Name}
		t := totals[k]
		if t == nil {
			t = &TrackTotal{Process: processName(names, e.Pid), Name: e.Name}
			totals[k] = t
		}
		t.Count++
		t.TotalUs += *e.Dur
		t.MaxUs = max(t.MaxUs, *e.Dur)
		slices = append(slices, e)
	}
	s.SpanUs = last - first
	keys := make([]key, 0, len(totals))
	for k := range totals {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if oi, oj := order[keys[i].pid], order[keys[j].pid]; oi != oj {
			return oi < oj
		}
		if a, b := totals[keys[i]].TotalUs, totals[keys[j]].TotalUs; a != b {
			return a > b
		}
		return keys[i].name < keys[j].name
	})
	for _, k := range keys {
		s.Totals = append(s.Totals, *totals[k])
	}
	sort.SliceStable(slices, func(i, j int) bool { return *slices[i].Dur > *slices[j].Dur })
	s.Longest = slices[:min(top, len(slices))]
	return s
}

// Print writes the summary as tables.
func (s *Summary) Print(w io.Writer, names map[int]string) error {
	fmt.Fprintf(w, "%d events, %d flows, %s from the first event to the last\n\n", s.Events, s.Flows, micros(s.SpanUs))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TRACK\tSLICE\tCOUNT\tTOTAL\tMEAN\tLONGEST")
	for _, t := range s.Totals {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", t.Process, t.Name, t.Count, micros(t.TotalUs), micros(t.TotalUs/float64(t.Count)), micros(t.MaxUs))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nLONGEST SLICES")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "DURATION\tAT\tTRACK\tSLICE\tARGS")
	for _, e := range s.Longest {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", micros(*e.Dur), micros(e.Ts), processName(names, e.Pid), e.Name, argsLine(e.Args))
	}
	return tw.Flush()
}

// micros formats microseconds for people.
func micros(us float64) string {
	switch {
	case us >= 1e6:
		return fmt.Sprintf("%.3fs", us/1e6)
	case us >= 1e3:
		return fmt.Sprintf("%.3fms", us/1e3)
	}
	return fmt.Sprintf("%.3fµs", us)
}

func argsLine(args map[string]any) string {
	keys := make([]string, 0, len(args))
	for k := range args {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%v", k, args[k]))
	}
	return strings.Join(parts, " ")
}

func processName(names map[int]string, pid int) string {
	if n, ok := names[pid]; ok {
		return n
	}
	return fmt.Sprintf("pid %d", pid)
}

// processOrder ranks the processes by their sort index, then pid.
func processOrder(f *File) map[int]int {
	index := map[int]float64{}
	pids := map[int]bool{}
	for _, e := range f.TraceEvents {
		pids[e.Pid] = true
		if e.Ph == "M" && e.Name == "process_sort_index" {
			if v, ok := e.Args["sort_index"].(float64); ok {
				index[e.Pid] = v
			}
		}
	}
	list := make([]int, 0, len(pids))
	for p := range pids {
		list = append(list, p)
	}
	sort.Slice(list, func(i, j int) bool {
		if index[list[i]] != index[list[j]] {
			return index[list[i]] < index[list[j]]
		}
		return list[i] < list[j]
	})
	order := map[int]int{}
	for i, p := range list {
		order[p] = i
	}
	return order
}
