package webhook

import (
	"container/list"
	"context"
	"sync"
	"time"
)

// State is what a Store knows of an event id.
type State int

// The states of an event id.
const (
	// StateNew means the id was not known: the caller has just claimed it
	// and must end the claim with Complete or Release.
	StateNew State = iota
	// StateInProgress means another delivery of the id holds a claim and
	// is being processed right now.
	StateInProgress
	// StateDone means a delivery of the id was processed successfully.
	StateDone
)

// String returns "new", "in progress" or "done".
func (s State) String() string {
	switch s {
	case StateNew:
		return "new"
	case StateInProgress:
		return "in progress"
	case StateDone:
		return "done"
	}
	return "unknown"
}

// Store remembers which event ids a Handler is processing or has
// processed. Implementations must be safe for concurrent use, and Claim
// must be atomic: of any number of concurrent Claims of one id, exactly
// one sees StateNew. A shared implementation (Redis SET NX with an expiry,
// a table with a unique key) lets several replicas of a receiver drop each
// other's duplicates.
type Store interface {
	// Claim records id as in progress and returns StateNew if it was
	// unknown (or forgotten); otherwise it changes nothing and returns
	// StateInProgress or StateDone. A claim that is never completed or
	// released (the process died) should lapse after a while.
	Claim(ctx context.Context, id string, now time.Time) (State, error)
	// Complete records a claimed id as processed, so that later Claims of
	// it return StateDone until the store forgets it.
	Complete(ctx context.Context, id string, now time.Time) error
	// Release forgets a claimed id whose processing failed, so that the
	// sender's retry is processed. It leaves an id in StateDone alone.
	Release(ctx context.Context, id string) error
}

var _ Store = (*MemoryStore)(nil)

// DefaultMemoryStoreSize is the number of ids a MemoryStore made with a
// size of 0 remembers.
const DefaultMemoryStoreSize = 100_000

// DefaultMemoryStoreTTL is how long a MemoryStore made with a ttl of 0
// remembers an id: twice Tolerance. Verify accepts a timestamp up to
// Tolerance ahead of now, so a delivery accepted now can be replayed with
// success for at most 2 × Tolerance; after that Verify refuses the replay
// itself and the id can go.
const DefaultMemoryStoreTTL = 2 * Tolerance

// MemoryStore is the in-memory Store the Handler uses by default. It is
// bounded: it holds at most its size of ids, forgets each id ttl after its
// last change (a claim lapses the same way), and when full forgets the
// oldest. It is safe for concurrent use. It protects one process only, and
// forgets everything when the process ends.
type MemoryStore struct {
	mu    sync.Mutex
	size  int
	ttl   time.Duration
	ids   map[string]*list.Element // of *memEntry
	order *list.List               // oldest change first
}

type memEntry struct {
	id      string
	done    bool
	expires time.Time
}

// NewMemoryStore returns an empty MemoryStore holding at most size ids
// (DefaultMemoryStoreSize if size <= 0) for ttl each (DefaultMemoryStoreTTL
// if ttl <= 0).
func NewMemoryStore(size int, ttl time.Duration) *MemoryStore {
	if size <= 0 {
		size = DefaultMemoryStoreSize
	}
	if ttl <= 0 {
		ttl = DefaultMemoryStoreTTL
	}
	return &MemoryStore{size: size, ttl: ttl, ids: make(map[string]*list.Element), order: list.New()}
}

// Claim implements Store.
func (s *MemoryStore) Claim(_ context.Context, id string, now time.Time) (State, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expire(now)
	if el, ok := s.ids[id]; ok {
		e := el.Value.(*memEntry)
		if now.Before(e.expires) {
			if e.done {
				return StateDone, nil
			}
			return StateInProgress, nil
		}
		s.remove(el)
	}
	s.add(&memEntry{id: id, expires: now.Add(s.ttl)})
	return StateNew, nil
}

// Complete implements Store. An id forgotten since its claim is recorded
// anew.
func (s *MemoryStore) Complete(_ context.Context, id string, now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if el, ok := s.ids[id]; ok {
		s.remove(el)
	}
	s.add(&memEntry{id: id, done: true, expires: now.Add(s.ttl)})
	return nil
}

// Release implements Store.
func (s *MemoryStore) Release(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if el, ok := s.ids[id]; ok && !el.Value.(*memEntry).done {
		s.remove(el)
	}
	return nil
}

// Len returns the number of ids the store holds, expired ones included
// until the next Claim sweeps them.
func (s *MemoryStore) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.ids)
}

// expire forgets ids from the oldest on while they have expired. Entries
// are kept in order of their last change and share one ttl, so the oldest
// expires first (if the clock steps back, some live a little longer).
func (s *MemoryStore) expire(now time.Time) {
	for el := s.order.Front(); el != nil; el = s.order.Front() {
		if now.Before(el.Value.(*memEntry).expires) {
			return
		}
		s.remove(el)
	}
}

func (s *MemoryStore) add(e *memEntry) {
	for len(s.ids) >= s.size {
		s.remove(s.order.Front())
	}
	s.ids[e.id] = s.order.PushBack(e)
}

func (s *MemoryStore) remove(el *list.Element) {
	delete(s.ids, el.Value.(*memEntry).id)
	s.order.Remove(el)
}
