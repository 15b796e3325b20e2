// Package atomicfile replaces a file so that readers, and a crash at any moment,
// see either the old content or the new, never a mix.
//
// Write creates a unique temporary file in the target's directory, writes it,
// fsyncs it, renames it over the target and fsyncs the directory; the temporary
// file is removed on any failure, a panicking writer included. WriteNoSync does
// the same without the fsyncs, for callers that detect torn files themselves and
// make them durable later with Sync. RemoveTemps clears the temporary files a
// killed process left behind. MkdirAll creates directories durably (each new
// one fsynced in its parent), and Resolve finds the file behind a symbolic link
// so that replacing it keeps the link.
package atomicfile
