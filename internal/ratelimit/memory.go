package ratelimit

import (
	"context"
	"errors"
	"hash/maphash"
	"sync"
	"sync/atomic"
)

// Memory is an in-process Store, for the single-instance embedded default:
// its counters are not shared with other processes.
type Memory struct{ *GCRA }

// NewMemory returns an empty in-process store.
func NewMemory() *Memory { return &Memory{NewGCRA(newMemoryTable(0))} }

// memoryTable is an in-process TATStore. Keys are spread over shards so
// concurrent checks of different keys rarely contend.
type memoryTable struct {
	seed   maphash.Seed
	shards [32]memoryShard

	// maxKeys, when above 0, bounds the keys held at once: a take of a
	// new key beyond it fails with errTableFull. keys counts them.
	maxKeys int64
	keys    atomic.Int64
}

// errTableFull is a take of a new key in a memoryTable that holds maxKeys.
var errTableFull = errors.New("ratelimit: in-process table full")

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

func newMemoryTable(maxKeys int64) *memoryTable {
	m := &memoryTable{seed: maphash.MakeSeed(), maxKeys: maxKeys}
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
	k, found := s.keys[key]
	if !found && m.maxKeys > 0 {
		if m.keys.Add(1) > m.maxKeys {
			m.keys.Add(-1)
			return 0, 0, false, errTableFull
		}
	}
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
		var swept int64
		for k, v := range s.keys {
			if v.tat < now {
				delete(s.keys, k)
				swept++
			}
		}
		s.mu.Unlock()
		m.counted(-swept)
		n += swept
	}
	return n, nil
}

// ResetRateLimit implements TATStore.
func (m *memoryTable) ResetRateLimit(_ context.Context, key string) error {
	s := m.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, found := s.keys[key]; found {
		delete(s.keys, key)
		m.counted(-1)
	}
	return nil
}

// counted adds n to the keys a bounded table holds.
func (m *memoryTable) counted(n int64) {
	if m.maxKeys > 0 {
		m.keys.Add(n)
	}
}

// PeekRateLimit implements TATStore.
func (m *memoryTable) PeekRateLimit(_ context.Context, key string) (int64, error) {
	s := m.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.keys[key].tat, nil
}
