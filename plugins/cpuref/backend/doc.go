// Package backend is the CPU reference backend: the interpreter of
// ir/interp behind the pluginapi.Backend interface, served as the
// kiln-backend-cpuref plugin (id "cpu-ref"). It is the reference oracle every other
// backend is verified against, so the host never picks it implicitly, and it has no
// precedence rank, so it sorts last.
package backend
