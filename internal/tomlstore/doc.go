// Package tomlstore holds what kiln's TOML store files (autotune records, PGO
// routes) have in common: Decode checks the file's schema number before decoding
// it strictly, with errors that give a line and column; Update replaces the file
// under its lock with the result of merging onto what is on disk now, so
// concurrent savers never lose each other's changes and a crash never leaves a
// torn file (a symbolic link stays a link, the mode is kept, new directories are
// made durable); and Map is the change tracking both stores share: it saves
// only its own changes, and never holds readers while it waits for the lock.
package tomlstore
