// Package client is the host's side of a connection to a kiln backend plugin:
// [Config] starts a plugin executable with kiln's go-plugin handshake and
// plugin sets, [Dispense] returns the [Conn] to it, and [ServeInProcess]
// connects to a backend served inside the test's own process
// (pluginapi.ServeTest).
//
// A Conn is a pluginapi.Backend whose methods are calls into the plugin, with
// the methods of every optional interface; [Conn.Capabilities] says which ones
// the plugin has, as it declared them when described (resident buffers and
// submits, artifacts, health, peer copies, concurrent adapters, spans), with
// the connection's protocol and data plane. On protocol 2 on Linux the Conn
// moves buffer bytes, submits ([Conn.SubmitAsync], [Pending]) and the inline
// dispatch ([Conn.DispatchSized]) through the shared-memory data plane of
// package internal/wire, checking every completion against what it asked for.
//
// Package host drives plugins through this package; a plugin never imports
// it, except in the tests that start its binary as a host would. See
// docs/design.md, "Wire between host and plugin".
package client
