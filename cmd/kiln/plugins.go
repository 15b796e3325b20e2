package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kiln-dev/kiln/host"
)

// pinJSON is one plugin of `kiln plugins --json` and `kiln plugins pin --json`.
type pinJSON struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
	Pinned string `json:"pinned,omitempty"`
	// Status is "pinned", "changed" (the executable no longer matches its
	// pin), or "not pinned".
	Status string `json:"status"`
}

// pinsJSON is `kiln plugins --json`.
type pinsJSON struct {
	PinFile string `json:"pin_file"`
	// Dir is the plugins directory; Pinning whether it is pinned (the pin
	// file has pins for it).
	Dir     string    `json:"plugins_dir"`
	Pinning bool      `json:"pinning"`
	Plugins []pinJSON `json:"plugins"`
}

// pluginsOptions are kiln plugins' options: the global ones alone.
type pluginsOptions struct{ *app }

func (a *app) pluginsCommand() *cobra.Command {
	cmd := command(&pluginsOptions{app: a}, runPlugins, &cobra.Command{
		Use:   "plugins",
		Short: "List the plugin executables and their pins; pin or unpin them",
		Long: `List every accepted plugin executable of the plugins directory with its
SHA-256, its pin and whether it still matches.

Pinning (kiln plugins pin) records the SHA-256 of each plugin in the pin file
($XDG_CONFIG_HOME/kiln/pins.toml), written atomically under a lock. Pins are
kept per plugins directory: while the pin file has pins for a directory, the
host runs only that directory's pinned plugins whose executable still has the
pinned checksum: a changed or unknown plugin is refused (kiln doctor says why,
and the refusal says what to run). A directory without pins is not pinned.
Pin again after upgrading a plugin you trust; kiln plugins pin --off (or
unpin --all) removes the directory's pins, which turns its pinning off.

--json prints an object with pin_file, plugins_dir, pinning and plugins (path,
sha256, pinned, status: "pinned", "changed" or "not pinned").`,
		Args: cobra.NoArgs,
	}, nil)
	cmd.AddCommand(a.pinCommand(), a.unpinCommand())
	return cmd
}

// runPlugins is kiln plugins: the plugins directory, its pinning and each
// accepted plugin with its pin status.
func runPlugins(ctx context.Context, o *pluginsOptions) error {
	st, err := o.pinStatus(ctx)
	if err != nil {
		return err
	}
	if o.json {
		return o.printJSON(st)
	}
	state := "off (no pins for this directory): every accepted plugin runs"
	if st.Pinning {
		state = "on: only pinned plugins that still match run"
	}
	fmt.Fprintf(o.out, "plugins directory: %s\npin file: %s\npinning:  %s\n\n", st.Dir, st.PinFile, state)
	tw := tabwriter.NewWriter(o.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PLUGIN\tSTATUS\tSHA-256")
	for _, p := range st.Plugins {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", filepath.Base(p.Path), p.Status, p.SHA256)
	}
	return tw.Flush()
}

// pinStatus reads the pins and hashes every accepted plugin.
func (a *app) pinStatus(ctx context.Context) (pinsJSON, error) {
	h, err := a.open(ctx)
	if err != nil {
		return pinsJSON{}, err
	}
	defer h.Close()
	file, on := h.PinFile()
	dir, err := pluginDirOf(h)
	if err != nil {
		return pinsJSON{}, err
	}
	st := pinsJSON{PinFile: file, Dir: dir, Pinning: on, Plugins: []pinJSON{}}
	pins, err := host.PinsOf(file, dir)
	if err != nil {
		return st, err
	}
	byName := map[string]string{}
	for _, p := range pins {
		byName[filepath.Base(p.Path)] = p.SHA256
	}
	for _, f := range h.Files() {
		if !f.Accepted {
			continue
		}
		abs, err := filepath.Abs(f.Path)
		if err != nil {
			return st, err
		}
		sum, err := host.FileSHA256(abs)
		if err != nil {
			return st, fmt.Errorf("hashing %s: %w. Fix: make it readable", abs, err)
		}
		pj := pinJSON{Path: abs, SHA256: sum, Pinned: byName[filepath.Base(abs)], Status: "not pinned"}
		switch {
		case pj.Pinned == sum:
			pj.Status = "pinned"
		case pj.Pinned != "":
			pj.Status = "changed"
		}
		st.Plugins = append(st.Plugins, pj)
	}
	return st, nil
}

// selectPlugins picks the accepted plugins named by args (file names, with or
// without the kiln-backend- prefix); no args picks all of them.
func selectPlugins(files []host.File, args []string) ([]string, error) {
	var paths []string
	found := map[string]bool{}
	for _, f := range files {
		if !f.Accepted {
			continue
		}
		name := filepath.Base(f.Path)
		for _, a := range args {
			if a == name || host.PluginPrefix+a == name {
				found[a] = true
			}
		}
		if len(args) == 0 || found[name] || found[strings.TrimPrefix(name, host.PluginPrefix)] {
			paths = append(paths, f.Path)
		}
	}
	for _, a := range args {
		if !found[a] {
			return nil, fmt.Errorf("no accepted plugin %q in the plugins directory. Fix: name one that `kiln plugins` lists (kiln doctor says why a file is not accepted)", a)
		}
	}
	if len(paths) == 0 {
		return nil, errors.New("no accepted plugin to pin. Fix: install kiln-backend-* executables (kiln doctor shows the plugins directory)")
	}
	return paths, nil
}

// pluginDirOf is the host's plugins directory, absolute.
func pluginDirOf(h *host.Host) (string, error) {
	dir, _ := h.PluginDir()
	return filepath.Abs(dir)
}

// pinFileOf is the host's pin file, or an error when there is none.
func pinFileOf(h *host.Host) (string, error) {
	file, _ := h.PinFile()
	if file == "" {
		return "", errors.New("no pin file location. Fix: set $XDG_CONFIG_HOME or $HOME")
	}
	return file, nil
}

// pinOptions are the flags and PLUGIN arguments of kiln plugins pin and
// unpin.
type pinOptions struct {
	*app
	Off bool // pin --off, unpin --all: remove every pin of the directory
	argList
}

// withPins opens the host and its pin file and turns pinning off (o.Off), or
// calls each with the plugins o.Args names (every accepted one when none).
func (o *pinOptions) withPins(ctx context.Context, each func(h *host.Host, file string, paths []string) error) error {
	h, err := o.open(ctx)
	if err != nil {
		return err
	}
	defer h.Close()
	file, err := pinFileOf(h)
	if err != nil {
		return err
	}
	if o.Off {
		return o.pinningOff(ctx, h, file)
	}
	paths, err := selectPlugins(h.Files(), o.Args)
	if err != nil {
		return err
	}
	return each(h, file, paths)
}

func (a *app) pinCommand() *cobra.Command {
	return command(&pinOptions{app: a}, runPin, &cobra.Command{
		Use:   "pin [PLUGIN...]",
		Short: "Record the SHA-256 of the plugins (all accepted ones by default); turns pinning on for the plugins directory (--off: turns it off)",
	}, func(o *pinOptions, f *pflag.FlagSet) {
		f.BoolVar(&o.Off, "off", false, "remove every pin of the plugins directory, turning its pinning off")
	})
}

// runPin is kiln plugins pin.
func runPin(ctx context.Context, o *pinOptions) error {
	if o.Off && len(o.Args) > 0 {
		return errors.New("--off removes every pin of the plugins directory and takes no plugin names. Fix: run kiln plugins pin --off, or kiln plugins unpin NAME")
	}
	return o.withPins(ctx, func(h *host.Host, file string, paths []string) error {
		return o.pin(ctx, h, file, paths)
	})
}

// pin pins paths in file and says so.
func (o *pinOptions) pin(ctx context.Context, h *host.Host, file string, paths []string) error {
	pins, err := host.PinPlugins(ctx, file, paths)
	if err != nil {
		return err
	}
	if o.json {
		out := make([]pinJSON, len(pins))
		for i, p := range pins {
			out[i] = pinJSON{Path: p.Path, SHA256: p.SHA256, Pinned: p.SHA256, Status: "pinned"}
		}
		return o.printJSON(out)
	}
	for _, p := range pins {
		fmt.Fprintf(o.out, "pinned %s %s\n", p.SHA256, p.Path)
	}
	dir, err := pluginDirOf(h)
	if err != nil {
		return err
	}
	fmt.Fprintf(o.out, "pinning is on for %s (%s): only its pinned plugins that still match run; kiln plugins pin --off turns it off\n", dir, file)
	return nil
}

// pinningOff removes every pin of h's plugins directory.
func (a *app) pinningOff(ctx context.Context, h *host.Host, file string) error {
	dir, err := pluginDirOf(h)
	if err != nil {
		return err
	}
	n, err := host.UnpinDir(ctx, file, dir)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.out, "removed %d pin(s) of %s from %s; pinning is off for %s: every accepted plugin runs\n", n, dir, file, dir)
	return nil
}

func (a *app) unpinCommand() *cobra.Command {
	return command(&pinOptions{app: a}, runUnpin, &cobra.Command{
		Use:   "unpin [PLUGIN...]",
		Short: "Remove plugins' pins; --all removes every pin of the plugins directory, turning its pinning off",
	}, func(o *pinOptions, f *pflag.FlagSet) {
		f.BoolVar(&o.Off, "all", false, "remove every pin of the plugins directory (the same as kiln plugins pin --off)")
	})
}

// runUnpin is kiln plugins unpin.
func runUnpin(ctx context.Context, o *pinOptions) error {
	if o.Off == (len(o.Args) > 0) {
		return errors.New("say what to unpin. Fix: name the plugins, or pass --all")
	}
	return o.withPins(ctx, func(h *host.Host, file string, paths []string) error {
		return o.unpin(ctx, h, file, paths)
	})
}

// unpin removes the pins of paths from file and says what pinning is left.
func (o *pinOptions) unpin(ctx context.Context, h *host.Host, file string, paths []string) error {
	n, err := host.UnpinPlugins(ctx, file, paths)
	if err != nil {
		return err
	}
	dir, err := pluginDirOf(h)
	if err != nil {
		return err
	}
	left, err := host.PinsOf(file, dir)
	if err != nil {
		return err
	}
	state := fmt.Sprintf("pinning is off for %s: no pins are left for it, so every accepted plugin runs", dir)
	if len(left) > 0 {
		state = fmt.Sprintf("pinning stays on for %s (%d pin(s) left): the unpinned plugins are refused until pinned again", dir, len(left))
	}
	fmt.Fprintf(o.out, "removed %d pin(s) from %s; %s\n", n, file, state)
	return nil
}
