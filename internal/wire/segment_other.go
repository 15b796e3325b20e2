//go:build !linux

package wire

// Segment stands in for a shared segment where there is no shared-memory data
// plane (it needs Linux's memfd): connections stay on gRPC and never hold one.
type Segment struct {
	ID  uint32
	Mem []byte
}
