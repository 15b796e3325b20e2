// Package conform runs the conformance kit (pluginapi/conformance/kit) on an
// installed plugin over the wire, for `kiln conformance`: Backend is a
// pluginapi.Backend on top of a host.Backend (every compile and dispatch goes
// through the host and the plugin process, as an application's would), and
// Run drives kit.Check on a T of its own that records each subtest's
// outcome instead of needing package testing's runner.
package conform
