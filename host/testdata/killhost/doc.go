// Command killhost is a minimal kiln host for the host package's orphan test:
// it opens a host on the plugins directory named by its argument, starts every
// plugin, prints "started" and waits to be killed. It runs without mTLS: a
// plugin's mTLS log line on a dead host's stderr pipe would kill it by SIGPIPE
// and hide whether the orphan guards work.
package main
