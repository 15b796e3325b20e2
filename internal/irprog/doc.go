// Package irprog builds the small IR programs that several packages dispatch:
// the host's tests and examples, the host client's tests and kiln bench.
package irprog
