package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kiln-dev/kiln/pluginapi"
)

// version is kiln's version, set at link time: make build passes
// -ldflags "-X main.version=$(git describe --tags --always --dirty)". Empty, the
// module version of the build (go install …@v1.2.3) stands in, else "devel".
var version string

// versionJSON is `kiln version --json`.
type versionJSON struct {
	Version   string `json:"version"`
	Commit    string `json:"commit,omitempty"`
	Modified  bool   `json:"modified,omitempty"`
	Go        string `json:"go"`
	Platform  string `json:"platform"`
	Protocols []int  `json:"plugin_protocols"`
}

// buildVersion describes this kiln executable from its link-time version and
// the build information the Go toolchain recorded.
func buildVersion() versionJSON {
	v := versionJSON{Version: version, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH,
		Protocols: []int{pluginapi.ProtocolV1, pluginapi.ProtocolV2}}
	info, ok := debug.ReadBuildInfo()
	if ok {
		if v.Version == "" && info.Main.Version != "" && info.Main.Version != "(devel)" {
			v.Version = info.Main.Version
		}
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				v.Commit = s.Value
			case "vcs.modified":
				v.Modified = s.Value == "true"
			}
		}
	}
	if v.Version == "" {
		v.Version = "devel"
	}
	return v
}

// line is the one-line form `kiln --version` prints.
func (v versionJSON) line() string {
	s := "kiln " + v.Version
	var extra []string
	if v.Commit != "" {
		extra = append(extra, "commit "+v.Commit[:min(12, len(v.Commit))])
	}
	if v.Modified {
		extra = append(extra, "modified")
	}
	extra = append(extra, v.Go, v.Platform)
	return s + " (" + strings.Join(extra, ", ") + ")"
}

// versionOptions are kiln version's options: the global ones alone.
type versionOptions struct{ *app }

func (a *app) versionCommand() *cobra.Command {
	return command(&versionOptions{app: a}, runVersion, &cobra.Command{
		Use:   "version",
		Short: "Print kiln's version, the Go toolchain it was built with and the plugin protocols it speaks",
		Long: `Print kiln's version (what make build linked in, or the module version of
go install), the commit it was built from where the build recorded it, the Go
toolchain and platform, and the plugin protocol versions this host speaks.
"kiln --version" prints the first line. A plugin executable prints its own id
and version with --version (kiln-backend-cuda --version).

--json prints an object with version, commit, modified, go, platform and
plugin_protocols.`,
		Args: cobra.NoArgs,
	}, nil)
}

// runVersion is kiln version.
func runVersion(_ context.Context, o *versionOptions) error {
	v := buildVersion()
	if o.json {
		return o.printJSON(v)
	}
	protocols := make([]string, len(v.Protocols))
	for i, p := range v.Protocols {
		protocols[i] = fmt.Sprint(p)
	}
	fmt.Fprintf(o.out, "%s\nplugin protocols %s\n", v.line(), strings.Join(protocols, ", "))
	return nil
}
