// Package tomlstore holds what kiln's TOML store files (autotune records, PGO
// routes) have in common: Decode checks the file's schema number before decoding
// it strictly, with errors that give a line and column, and Update replaces the
// file under its lock with the result of merging onto what is on disk now, so
// concurrent savers never lose each other's changes and a crash never leaves a
// torn file.
package tomlstore
