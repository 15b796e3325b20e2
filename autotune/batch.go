package autotune

import "context"

// Batcher puts records into a Store and saves them in batches, so a tuner
// that finds many winners rewrites the file once per batch rather than once
// per record (which, each save writing every record, is quadratic in the
// number of records). It is not safe for concurrent use.
type Batcher struct {
	st      *Store
	every   int
	pending int
	saves   int
}

// NewBatcher returns a Batcher that saves st after every `every` puts (at
// least 1) and at Flush.
func NewBatcher(st *Store, every int) *Batcher {
	return &Batcher{st: st, every: max(every, 1)}
}

// Put puts key's record and saves the store when a batch is full.
func (b *Batcher) Put(ctx context.Context, key Key, r Record) error {
	if err := b.st.Put(key, r); err != nil {
		return err
	}
	b.pending++
	if b.pending >= b.every {
		return b.Flush(ctx)
	}
	return nil
}

// Flush saves the records put since the last save, if any.
func (b *Batcher) Flush(ctx context.Context) error {
	if b.pending == 0 {
		return nil
	}
	wrote, err := b.st.SaveIfDirty(ctx)
	if err != nil {
		return err
	}
	b.pending = 0
	if wrote {
		b.saves++
	}
	return nil
}

// Saves returns the number of saves that wrote the file.
func (b *Batcher) Saves() int { return b.saves }
