// Package peerauth authenticates the connection between a kiln host and a
// plugin it started without TLS, where the system tells a unix socket's ends
// who the other end is (Linux's SO_PEERCRED): the plugin's gRPC server accepts
// a connection only from its host's process, running as the plugin's user,
// whose first bytes are a random token the host passed the plugin for this
// start alone; the host's client accepts a socket only when the plugin process
// it started listens on it. See docs/design.md, "Plugin transport
// authentication".
package peerauth
