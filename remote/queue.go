package remote

import (
	"context"
	"errors"
	"sync"
	"time"
)

// task is one queued upload: run makes its remote calls (through Store.do);
// size counts against Options.MaxPendingBytes.
type task struct {
	op   string
	size int64
	run  func(ctx context.Context) error
}

// queue is a Store's write-behind queue. One worker goroutine runs the tasks in
// order; it starts with the first task and ends when the queue is empty, so an
// idle Store runs no goroutine.
type queue struct {
	s *Store

	mu     sync.Mutex
	tasks  []task
	bytes  int64
	idle   chan struct{} // closed when the worker ends; nil while none runs
	ctx    context.Context
	cancel context.CancelFunc
}

func newQueue(s *Store) *queue {
	q := &queue{s: s}
	q.ctx, q.cancel = context.WithCancel(context.Background())
	return q
}

// add queues t and reports whether it did; a task that would take the queue
// over its byte bound is dropped and counted.
func (q *queue) add(t task) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.bytes+t.size > q.s.opts.MaxPendingBytes {
		q.s.counts.dropped.Add(1)
		q.s.log.Debug("fleet tier upload queue full; dropped", "op", t.op, "bytes", t.size)
		return false
	}
	q.tasks = append(q.tasks, t)
	q.bytes += t.size
	if q.idle == nil {
		q.idle = make(chan struct{})
		go q.work(q.ctx, q.idle)
	}
	return true
}

// work runs the queued tasks until none is left. A task skipped because the
// remote is down is dropped and counted.
func (q *queue) work(ctx context.Context, idle chan struct{}) {
	for {
		q.mu.Lock()
		if len(q.tasks) == 0 || ctx.Err() != nil {
			q.idle = nil
			if len(q.tasks) > 0 {
				// Queued after a Flush gave up on this worker: a new one runs them.
				q.idle = make(chan struct{})
				go q.work(q.ctx, q.idle)
			}
			q.mu.Unlock()
			close(idle)
			return
		}
		t := q.tasks[0]
		q.tasks = q.tasks[1:]
		q.bytes -= t.size
		q.mu.Unlock()
		if err := t.run(ctx); errors.Is(err, errDown) || ctx.Err() != nil {
			q.s.counts.dropped.Add(1)
		}
	}
}

// Flush waits until every queued upload has been made, at most
// Options.FlushTimeout (and never past ctx); what is left then is dropped and
// counted. It never fails: the remote is a cache.
func (s *Store) Flush(ctx context.Context) {
	q := s.queue
	q.mu.Lock()
	idle := q.idle
	q.mu.Unlock()
	if idle == nil {
		return
	}
	timer := time.NewTimer(s.opts.FlushTimeout)
	defer timer.Stop()
	select {
	case <-idle:
		return
	case <-timer.C:
	case <-ctx.Done():
	}
	q.mu.Lock()
	left := len(q.tasks)
	q.tasks, q.bytes = nil, 0
	q.cancel()
	q.ctx, q.cancel = context.WithCancel(context.Background())
	q.mu.Unlock()
	s.counts.dropped.Add(uint64(left))
	s.log.Warn("fleet tier uploads still queued at flush; dropped", "dropped", left, "waited", s.opts.FlushTimeout)
	<-idle
}
