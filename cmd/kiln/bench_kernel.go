package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/kiln-dev/kiln/cmd/kiln/internal/runs"
	"github.com/kiln-dev/kiln/host"
	"github.com/kiln-dev/kiln/ir/kernels"
)

// kernelBench is `kiln bench --kernel NAME`: the flags.
type kernelBench struct {
	kernel string
	size   int
	repeat int
	warmup time.Duration
	on     []string
}

func (kb *kernelBench) flags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&kb.kernel, "kernel", "", "time this corpus kernel on every ready backend side by side (`kiln run --list` names them) instead of the plugin boundary")
	f.IntVar(&kb.size, "size", 0, "with --kernel: the problem size (default: the kernel's largest standard size)")
	f.IntVar(&kb.repeat, "repeat", 20, "with --kernel: timed runs per backend after the warm-up")
	f.DurationVar(&kb.warmup, "warmup", 300*time.Millisecond, "with --kernel: the least time of untimed runs per backend")
	f.StringSliceVar(&kb.on, "on", nil, "with --kernel: the backends to compare (id or id:adapter, comma-separated; default every ready backend but the cpu-ref oracle)")
}

// benchKernelJSON is one backend's row of `kiln bench --kernel --json`.
type benchKernelJSON struct {
	Kernel  string `json:"kernel"`
	Size    int    `json:"size"`
	Backend string `json:"backend"`
	runJSON
}

// run times the kernel on each backend, verified first, and prints them side
// by side.
func (kb *kernelBench) run(ctx context.Context, a *app) error {
	k, ok := kernels.Lookup(kb.kernel)
	if !ok {
		return fmt.Errorf("no corpus kernel %q. Fix: pick one of the names `kiln run --list` prints", kb.kernel)
	}
	size := kb.size
	if size == 0 {
		size = k.Sizes[len(k.Sizes)-1]
	}
	h, err := a.open(ctx)
	if err != nil {
		return err
	}
	defer h.Close()
	on := kb.on
	if len(on) == 0 {
		all, err := h.Survey(ctx)
		if err != nil {
			return err
		}
		for _, b := range all {
			if b.Status == host.StatusReady && b.Dispatches && !b.ReferenceOracle {
				on = append(on, b.ID+":"+strconv.Itoa(b.Adapter))
			}
		}
	}
	if len(on) == 0 {
		return errors.New("no ready backend to compare (cpu-ref, the oracle, runs only when named). Fix: run `kiln doctor`, or name backends with --on cpu-ref")
	}
	lim, err := limits(ctx, h, "", false)
	if err != nil {
		return err
	}
	if err := lim.CheckKernel(k, size); err != nil {
		return err
	}
	var rows []benchKernelJSON
	bar := a.progressBar()
	for i, b := range on {
		bar.update(i, len(on), k.Name+" on "+b)
		job := runs.KernelJob(k, size, 1, b)
		row := benchKernelJSON{Kernel: k.Name, Size: size, Backend: b}
		o, err := runs.Run(ctx, h, job, true)
		if err == nil {
			var t *runs.Timing
			if t, err = runs.Repeat(ctx, h, job, o.Backend, runs.RepeatOptions{Runs: kb.repeat, Warmup: kb.warmup}); err == nil {
				row.runJSON = toRunJSON(o, nil)
				row.addTiming(t)
				row.Backend = o.Backend
			}
		}
		if err != nil {
			row.runJSON = toRunJSON(o, err)
		}
		rows = append(rows, row)
	}
	bar.finish()
	if a.json {
		return a.printJSON(rows)
	}
	fmt.Fprintf(a.out, "%s, size %d: %d timed runs per backend after a warm-up of at least %v\n\n", k.Name, size, kb.repeat, kb.warmup)
	tw := tabwriter.NewWriter(a.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "BACKEND\tDEVICE MEDIAN\tDEVICE MIN\tSUBMIT MEDIAN\tSUBMIT MIN\tCOMPUTE\tMEMORY")
	d := func(ns int64) string {
		if ns == 0 {
			return "-"
		}
		return time.Duration(ns).Round(100 * time.Nanosecond).String()
	}
	var failures []string
	for _, r := range rows {
		if r.Error != "" {
			fmt.Fprintf(tw, "%s\tFAILED\t\t\t\t\t\n", r.Backend)
			failures = append(failures, r.Backend+": "+r.Error)
			continue
		}
		compute := "-"
		if r.Gflops > 0 {
			compute = flopRate(r.Gflops)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%.2f GB/s\n", r.Backend, d(r.DeviceNs), d(r.DeviceMinNs), d(r.SubmitNs), d(r.SubmitMinNs), compute, r.Gbps)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(a.out, "\nThroughput is at the median device time (the submit's where the backend has no device timestamps: -).")
	for _, f := range failures {
		fmt.Fprintln(a.out, f)
	}
	if len(failures) > 0 {
		return &exitError{code: 1, err: errors.New("some backends failed the kernel (see above). Fix: the failing backend's output differs from the reference, or it cannot run the kernel; report it with the kernel and size")}
	}
	return nil
}
