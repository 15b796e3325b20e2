package pluginapi

import (
	"os"
	"strconv"
	"strings"
)

// ProtocolsEnv names the environment variable that limits the protocol versions
// a plugin offers, as a comma-separated list ("1" makes any plugin behave as one
// built for protocol 1). A host passes its environment to the plugins it starts.
const ProtocolsEnv = "KILN_PLUGIN_PROTOCOLS"

// ServeOption adjusts Serve.
type ServeOption func(*serveOptions)

type serveOptions struct{ protocols []int }

// Protocols makes Serve offer only the given protocol versions (ProtocolV1,
// ProtocolV2), as a plugin built for those alone would. Versions this SDK does
// not know are ignored; when none is left, every version is offered.
func Protocols(versions ...int) ServeOption {
	return func(o *serveOptions) {
		for _, v := range versions {
			if v == ProtocolV1 || v == ProtocolV2 {
				o.protocols = append(o.protocols, v)
			}
		}
	}
}

// servedProtocols applies opts and ProtocolsEnv: the versions Serve offers
// (none: all).
func servedProtocols(opts []ServeOption) []int {
	var o serveOptions
	for _, opt := range opts {
		opt(&o)
	}
	env := os.Getenv(ProtocolsEnv)
	if env == "" {
		return o.protocols
	}
	var fromEnv []int
	for _, f := range strings.Split(env, ",") {
		if v, err := strconv.Atoi(strings.TrimSpace(f)); err == nil {
			fromEnv = append(fromEnv, v)
		}
	}
	var e serveOptions
	Protocols(fromEnv...)(&e)
	if len(o.protocols) == 0 {
		return e.protocols
	}
	var both []int
	for _, v := range o.protocols {
		for _, w := range e.protocols {
			if v == w {
				both = append(both, v)
			}
		}
	}
	return both
}
