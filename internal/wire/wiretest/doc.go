// Package wiretest holds what the tests of both ends of the wire share: the
// host client's tests encode these values and pluginapi's decode them. It is
// imported by tests only.
package wiretest
