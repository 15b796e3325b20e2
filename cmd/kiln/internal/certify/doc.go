// Package certify is what `kiln certify` does: for each corpus kernel it runs
// the kernel once on every ready GPU backend (reference oracles are never routed
// to, so they are not measured), drops the backends whose outputs differ from
// the kernel's Go reference, and hands the rest to pgo.Certify, which times them
// and records the fastest as the route for the kernel's op id.
package certify
