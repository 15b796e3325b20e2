package filelock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"
)

// Suffix is appended to a guarded file's path to name its lock file.
const Suffix = ".lock"

// errBusy is what tryLock returns when another holder has the lock.
var errBusy = errors.New("lock is held")

// Lock is a held lock; Unlock releases it.
type Lock struct {
	f *os.File
}

// PathFor returns the lock file that guards target.
func PathFor(target string) string { return target + Suffix }

// Acquire takes the exclusive lock guarding target, creating target's lock file
// (but not its directory) when needed. It waits, polling with a growing delay of
// up to 25 ms, until the lock is free or ctx is done.
func Acquire(ctx context.Context, target string) (*Lock, error) {
	path := PathFor(target)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock file %s: %w. Fix: make sure its directory exists and is writable", path, err)
	}
	delay := time.Millisecond
	for {
		err := tryLock(f)
		if err == nil {
			return &Lock{f: f}, nil
		}
		if !errors.Is(err, errBusy) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		timer := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			timer.Stop()
			f.Close()
			return nil, fmt.Errorf("wait for lock %s: %w. Fix: another kiln process is saving this store; let it finish, or stop it if it hangs", path, ctx.Err())
		case <-timer.C:
		}
		delay = min(2*delay, 25*time.Millisecond)
	}
}

// Unlock releases the lock. It is safe to call more than once.
func (l *Lock) Unlock() error {
	if l.f == nil {
		return nil
	}
	f := l.f
	l.f = nil
	errUnlock := unlock(f)
	errClose := f.Close()
	if err := errors.Join(errUnlock, errClose); err != nil {
		return fmt.Errorf("unlock %s: %w", f.Name(), err)
	}
	return nil
}
