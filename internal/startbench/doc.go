// Command startbench times what issue 24 compares a kiln Acquire with on a GPU
// machine (scripts/gpu-start-run.sh runs it next to the driver-level
// references): for each repetition it opens a Host on a directory holding
// only the plugin given, acquires the backend (start, handshake, Describe and
// the adapter's Open), and closes the host. It prints one line per
// repetition and the medians:
//
//	startbench -plugin bin/plugins/kiln-backend-cuda -backend cuda -n 7
package main
