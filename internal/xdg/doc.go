// Package xdg locates the per-user base directories kiln's stores live in: the
// cache, config and data homes of the XDG Base Directory specification, with the
// macOS (~/Library/Caches, ~/Library/Application Support) and Windows
// (%LocalAppData%, %AppData%) fallbacks. The functions are pure: they read the
// environment through the Env they are given, so tests never touch the process
// environment.
package xdg
