package main

import (
	"io"
	"os"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// progressBar shows how far a long command (run --all, stats, bench, doctor,
// certify, tune) has got: "saxpy on vulkan:0  30% |█████     | (3/10) [2s:4s]",
// redrawn in place on a terminal and erased when the command is done. On
// anything that is not a terminal (a pipe, a file, a test's buffer) it draws
// nothing; the zero progressBar draws nothing either.
type progressBar struct {
	w   io.Writer // nil: draw nothing
	bar *progressbar.ProgressBar
}

// newProgressBar returns a bar that draws on w when w is a terminal.
func newProgressBar(w io.Writer) *progressBar {
	if !isTerminal(w) {
		return &progressBar{}
	}
	return &progressBar{w: w}
}

// progressBar is the bar of a command: on stderr when it is a terminal, never
// with --json.
func (a *app) progressBar() *progressBar {
	if a.json {
		return &progressBar{}
	}
	return newProgressBar(a.errOut)
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// progressWidth is the bar's width in cells, the text beside it aside.
const progressWidth = 30

// update shows that done of total steps are done and what runs now. Steps
// take milliseconds at least, so every update is drawn (no throttle).
func (p *progressBar) update(done, total int, what string) {
	if p.w == nil || total <= 0 {
		return
	}
	if p.bar == nil {
		p.bar = progressbar.NewOptions(total,
			progressbar.OptionSetWriter(p.w),
			progressbar.OptionSetWidth(progressWidth),
			progressbar.OptionShowCount(),
			progressbar.OptionSetElapsedTime(true),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionClearOnFinish())
	}
	if p.bar.GetMax() != total {
		p.bar.ChangeMax(total)
	}
	p.bar.Describe(what)
	_ = p.bar.Set(done) // a terminal that cannot be written to loses the bar, nothing else
}

// finish erases the bar.
func (p *progressBar) finish() {
	if p.bar != nil {
		_ = p.bar.Finish() // erases the line: OptionClearOnFinish
	}
}
