// Package filelock is an exclusive lock shared by processes and goroutines,
// taken on a "<file>.lock" sibling of the file it guards (flock(2) LOCK_EX on
// Unix, LockFileEx on Windows). Waiting honours a context, so a caller can bound
// it; the operating system drops the lock when its holder exits or is killed, so
// a crashed process never leaves a file locked. The lock file itself is never
// removed: removing it would let two processes lock two different files.
package filelock
