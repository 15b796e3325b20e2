package host

// Traffic counts the buffer bytes that crossed between the host and a plugin
// process: every byte written into or read out of the plugin's buffers by Write,
// Read and the v1 API's inputs and outputs, whatever the transport (gRPC
// messages or shared memory). Commands are not counted, and neither are bytes an
// application writes or reads in place through Buffer.Map.
type Traffic struct {
	// ToPlugin and FromPlugin are bytes sent to and received from the plugin.
	ToPlugin, FromPlugin int64
}

// Traffic returns the bytes moved between the host and this backend's plugin
// since the host opened it (relaunches included).
func (b *Backend) Traffic() Traffic {
	return Traffic{ToPlugin: b.p.v2.toPlugin.Load(), FromPlugin: b.p.v2.fromPlugin.Load()}
}
