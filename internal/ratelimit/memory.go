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
	mu  sync.Mutex
	tat map[string]int64
}

var (
	_ Store    = (*Memory)(nil)
	_ TATStore = (*memoryTable)(nil)
)

func newMemoryTable() *memoryTable {
	m := &memoryTable{seed: maphash.MakeSeed()}
	for i := range m.shards {
		m.shards[i].tat = map[string]int64{}
	}
	return m
}

func (m *memoryTable) shard(key string) *memoryShard {
	return &m.shards[maphash.String(m.seed, key)%uint64(len(m.shards))]
}

// TakeRateLimit implements TATStore.
func (m *memoryTable) TakeRateLimit(_ context.Context, key string, now, interval, period int64) (int64, bool, error) {
	s := m.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	stored, ok := s.tat[key]
	tat := now
	if ok && stored > now {
		tat = stored
	}
	if tat+interval-now > period {
		return stored, false, nil
	}
	s.tat[key] = tat + interval
	return tat + interval, true, nil
}

// SweepRateLimits implements TATStore.
func (m *memoryTable) SweepRateLimits(_ context.Context, now int64) (int64, error) {
	var n int64
	for i := range m.shards {
		s := &m.shards[i]
		s.mu.Lock()
		for k, tat := range s.tat {
			if tat < now {
				delete(s.tat, k)
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
	delete(s.tat, key)
	return nil
}

// PeekRateLimit implements TATStore.
func (m *memoryTable) PeekRateLimit(_ context.Context, key string) (int64, error) {
	s := m.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tat[key], nil
}
