// Package bench measures the plugin boundary for `kiln bench`: how long a plugin
// takes to start, hand-shake and describe itself, the round trip of a 1-element
// dispatch, and a large in+out dispatch through the plugin compared with the same
// CPU interpreter run in-process, so the cost of crossing the process boundary is
// visible. It is measurement code, not a test: nothing here asserts a time.
package bench
