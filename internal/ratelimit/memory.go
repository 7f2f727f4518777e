package ratelimit

import (
	"context"
	"hash/maphash"
	"sync"
)

// Memory is an in-process Store, for the single-instance embedded default:
// its counters are not shared with other processes.
type Memory struct{ *GCRA }

// NewMemory returns an empty in-process store.
func NewMemory() *Memory { return &Memory{NewGCRA(newMemoryTable())} }

// memoryTable is an in-process TATStore. Keys are spread over shards so
// concurrent checks of different keys rarely contend.
type memoryTable struct {
	seed   maphash.Seed
	shards [32]memoryShard
}

type memoryShard struct {
	mu   sync.Mutex
	keys map[string]memoryKey
}

// memoryKey is a key's GCRA state: its TAT and the latest time a take of
// it ran at.
type memoryKey struct{ tat, seen int64 }

var (
	_ Store    = (*Memory)(nil)
	_ TATStore = (*memoryTable)(nil)
)

func newMemoryTable() *memoryTable {
	m := &memoryTable{seed: maphash.MakeSeed()}
	for i := range m.shards {
		m.shards[i].keys = map[string]memoryKey{}
	}
	return m
}

func (m *memoryTable) shard(key string) *memoryShard {
	return &m.shards[maphash.String(m.seed, key)%uint64(len(m.shards))]
}

// TakeRateLimit implements TATStore.
func (m *memoryTable) TakeRateLimit(_ context.Context, key string, now, interval, period int64) (int64, int64, bool, error) {
	s := m.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	k := s.keys[key]
	k.seen = max(k.seen, now)
	tat := max(k.tat, k.seen)
	allowed := tat+interval-k.seen <= period
	if allowed {
		k.tat = tat + interval
	}
	s.keys[key] = k
	return k.tat, k.seen, allowed, nil
}

// SweepRateLimits implements TATStore.
func (m *memoryTable) SweepRateLimits(_ context.Context, now int64) (int64, error) {
	var n int64
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.Lock()
		for k, v := range s.keys {
			if v.tat < now {
				delete(s.keys, k)
				n++
			}
		}
		s.mu.Unlock()
	}
	return n, nil
}

// ResetRateLimit implements TATStore.
func (m *memoryTable) ResetRateLimit(_ context.Context, key string) error {
	s := m.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.keys, key)
	return nil
}

// PeekRateLimit implements TATStore.
func (m *memoryTable) PeekRateLimit(_ context.Context, key string) (int64, error) {
	s := m.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.keys[key].tat, nil
}
