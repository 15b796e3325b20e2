package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/kiln-dev/kiln/host"
)

func main() {
	plugin := flag.String("plugin", "", "the plugin executable")
	backend := flag.String("backend", "", "the backend name to acquire")
	n := flag.Int("n", 7, "repetitions")
	logs := flag.Bool("log", false, "log the host's and the plugin's lines (info) to stderr")
	flag.Parse()
	var logger hclog.Logger
	if *logs {
		logger = hclog.New(&hclog.LoggerOptions{Name: "startbench", Level: hclog.Info, Output: os.Stderr})
	}
	if err := run(*plugin, *backend, *n, logger); err != nil {
		fmt.Fprintln(os.Stderr, "startbench:", err)
		os.Exit(1)
	}
}

func run(plugin, backend string, n int, logger hclog.Logger) error {
	if plugin == "" || backend == "" || n <= 0 {
		return fmt.Errorf("need -plugin, -backend and a positive -n")
	}
	exe, err := filepath.Abs(plugin)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "kiln-startbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := os.Symlink(exe, filepath.Join(dir, host.PluginPrefix+backend)); err != nil {
		return err
	}
	ctx := context.Background()
	var acquire, start, open []time.Duration
	for i := range n {
		began := time.Now()
		h, err := host.Open(ctx, host.Options{PluginDir: dir, TraceFile: "off", Remote: "off", Logger: logger})
		if err != nil {
			return err
		}
		if _, err := h.Acquire(ctx, backend); err != nil {
			h.Close()
			return err
		}
		took := time.Since(began)
		var st time.Duration
		for _, p := range h.Report().Plugins {
			if p.Err == nil {
				st = p.StartTime
			}
		}
		h.Close()
		acquire, start, open = append(acquire, took), append(start, st), append(open, took-st)
		fmt.Printf("%s run %d: acquire %.1f ms (plugin start+handshake+describe %.1f ms, the rest %.1f ms)\n",
			backend, i, ms(took), ms(st), ms(took-st))
	}
	fmt.Printf("%s median of %d: acquire %.1f ms, start+handshake+describe %.1f ms, the rest %.1f ms\n",
		backend, n, ms(median(acquire)), ms(median(start)), ms(median(open)))
	return nil
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
