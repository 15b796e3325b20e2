// Package syncbuf is a bytes buffer that goroutines share: the log sink the
// tests hand to a host or a plugin client, whose goroutines write to it while
// the test reads it.
package syncbuf
