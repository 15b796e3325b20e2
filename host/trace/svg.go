package trace

import (
	"fmt"
	"html"
	"io"
	"sort"
)

// SVG geometry.
const (
	svgWidth   = 1600.0 // drawing width, pixels
	svgLabel   = 260.0  // the track labels' column
	svgRow     = 18.0   // one lane's height
	svgGap     = 8.0    // between processes
	svgTop     = 40.0   // title and time axis
	svgMinSlot = 0.5    // a slice is at least this wide, so that short ones show
)

// svgColors colour slices by category.
var svgColors = map[string]string{"host": "#4e79a7", "plugin": "#f28e2b", "device": "#59a14f", "flow": "#9c755f"}

// WriteSVG draws f's timeline: one row per process (host, each plugin, each
// adapter), one band per lane within it, each slice a box coloured by its
// category, each flow a line between its points.
func WriteSVG(w io.Writer, f *File) error {
	names := f.ProcessNames()
	order := processOrder(f)
	type lane struct{ pid, tid int }
	lanes := map[lane]bool{}
	first, last := 0.0, 0.0
	seen := false
	for _, e := range f.TraceEvents {
		if e.Ph != "X" || e.Dur == nil {
			continue
		}
		lanes[lane{e.Pid, e.Tid}] = true
		if !seen || e.Ts < first {
			first = e.Ts
		}
		if !seen || e.End() > last {
			last = e.End()
		}
		seen = true
	}
	list := make([]lane, 0, len(lanes))
	for l := range lanes {
		list = append(list, l)
	}
	sort.Slice(list, func(i, j int) bool {
		if oi, oj := order[list[i].pid], order[list[j].pid]; oi != oj {
			return oi < oj
		}
		return list[i].tid < list[j].tid
	})
	rowY := map[lane]float64{}
	y := svgTop
	var labels []string
	for i, l := range list {
		if i > 0 && l.pid != list[i-1].pid {
			y += svgGap
		}
		if i == 0 || l.pid != list[i-1].pid {
			labels = append(labels, fmt.Sprintf(`<text x="4" y="%.1f" font-size="12">%s</text>`, y+13, html.EscapeString(processName(names, l.pid))))
		}
		rowY[l] = y
		y += svgRow
	}
	height := y + 20
	span := last - first
	if span <= 0 {
		span = 1
	}
	scale := (svgWidth - svgLabel - 10) / span
	x := func(ts float64) float64 { return svgLabel + (ts-first)*scale }
	if _, err := fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif">
<rect width="100%%" height="100%%" fill="white"/>
<text x="4" y="16" font-size="14">kiln trace: %s, %d events</text>
<text x="%.1f" y="32" font-size="11">0</text><text x="%.1f" y="32" font-size="11" text-anchor="end">%s</text>
`, svgWidth, height, html.EscapeString(micros(span)), len(f.TraceEvents), svgLabel, svgWidth-10, html.EscapeString(micros(span))); err != nil {
		return err
	}
	for _, l := range labels {
		if _, err := fmt.Fprintln(w, l); err != nil {
			return err
		}
	}
	for _, e := range f.TraceEvents {
		if e.Ph != "X" || e.Dur == nil {
			continue
		}
		color, ok := svgColors[e.Cat]
		if !ok {
			color = "#bab0ac"
		}
		ry := rowY[lane{e.Pid, e.Tid}]
		if _, err := fmt.Fprintf(w, `<rect x="%.2f" y="%.1f" width="%.2f" height="%.1f" fill="%s"><title>%s %s at %s</title></rect>
`, x(e.Ts), ry+1, max(*e.Dur*scale, svgMinSlot), svgRow-2, color, html.EscapeString(e.Name), html.EscapeString(micros(*e.Dur)), html.EscapeString(micros(e.Ts-first))); err != nil {
			return err
		}
	}
	for _, fl := range f.Flows() {
		for i := 1; i < len(fl.Points); i++ {
			a, b := fl.Points[i-1], fl.Points[i]
			ya, oka := rowY[lane{a.Pid, a.Tid}]
			yb, okb := rowY[lane{b.Pid, b.Tid}]
			if !oka || !okb {
				continue
			}
			if _, err := fmt.Fprintf(w, `<line x1="%.2f" y1="%.1f" x2="%.2f" y2="%.1f" stroke="%s" stroke-width="0.8"/>
`, x(a.Ts), ya+svgRow/2, x(b.Ts), yb+svgRow/2, svgColors["flow"]); err != nil {
				return err
			}
		}
	}
	_, err := fmt.Fprintln(w, "</svg>")
	return err
}
