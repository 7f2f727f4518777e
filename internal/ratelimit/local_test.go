package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"
)

// localCounts holds at most its bound of subjects: one more is refused
// (errTableFull) while those it holds are still counted, and once their
// quotas are whole again a sweep makes room.
func TestLocalCountsBound(t *testing.T) {
	c := newLocalCounts(3)
	l := Limit{Count: 2, Period: time.Second}
	now := time.Unix(1_900_000_000, 0)
	for i := range 3 {
		if r, err := c.take(fmt.Sprint("k", i), l, now); err != nil || !r.Allowed {
			t.Fatalf("take k%d = %+v, %v; want allowed", i, r, err)
		}
	}
	if _, err := c.take("k3", l, now); !errors.Is(err, errTableFull) {
		t.Errorf("a fourth subject = %v, want errTableFull", err)
	}
	if r, err := c.take("k0", l, now); err != nil || !r.Allowed || r.Remaining != 0 {
		t.Errorf("k0 again = %+v, %v; want allowed, none remaining", r, err)
	}
	if r, err := c.take("k0", l, now); err != nil || r.Allowed {
		t.Errorf("k0 a third time = %+v, %v; want limited", r, err)
	}
	// Two seconds on, every quota is whole: the full table sweeps them
	// out (its sweep every minute is not due).
	later := now.Add(2 * time.Second)
	if r, err := c.take("k3", l, later); err != nil || !r.Allowed {
		t.Errorf("a fourth subject once the others expired = %+v, %v; want allowed", r, err)
	}
	if n := c.table.keys.Load(); n != 1 {
		t.Errorf("subjects held after the sweep = %d, want 1", n)
	}
}

// A Reset of a subject the bounded table holds gives its room back.
func TestLocalCountsResetFreesRoom(t *testing.T) {
	c := newLocalCounts(1)
	l := Limit{Count: 1, Period: time.Hour}
	now := time.Unix(1_900_000_000, 0)
	if _, err := c.take("a", l, now); err != nil {
		t.Fatal(err)
	}
	if err := c.gcra.Reset(t.Context(), "a"); err != nil {
		t.Fatal(err)
	}
	if err := c.gcra.Reset(t.Context(), "absent"); err != nil {
		t.Fatal(err)
	}
	if r, err := c.take("b", l, now); err != nil || !r.Allowed {
		t.Errorf("take after the reset = %+v, %v; want allowed", r, err)
	}
}

// With its own counts full, a fail-open limit whose store fails lets a
// subject they do not hold through uncounted, as before they existed:
// refusing it let one client who filled them turn every new client away.
// The subjects they hold are still counted.
func TestFailOpenWithLocalCountsFull(t *testing.T) {
	l, err := New(failingStore{}, []string{"register=1/1h"}, time.Now, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	l.local = newLocalCounts(1)
	if d, err := l.Allow(t.Context(), Register, "held"); err != nil || !d.Allowed {
		t.Fatalf("first subject = %+v, %v; want allowed", d, err)
	}
	if d, err := l.Allow(t.Context(), Register, "held"); err != nil || d.Allowed {
		t.Errorf("the held subject again = %+v, %v; want limited", d, err)
	}
	for range 3 {
		if d, err := l.Allow(t.Context(), Register, "new"); err != nil || !d.Allowed {
			t.Errorf("a subject the full counts do not hold = %+v, %v; want allowed, uncounted", d, err)
		}
	}
}

// failingStore is a store whose every call fails.
type failingStore struct{}

func (failingStore) Take(context.Context, string, Limit, time.Time) (Result, error) {
	return Result{}, errors.New("connection refused")
}
func (failingStore) Reset(context.Context, string) error { return errors.New("connection refused") }
func (failingStore) Mark(context.Context, string, time.Time, time.Duration) error {
	return errors.New("connection refused")
}
func (failingStore) Marked(context.Context, string, time.Time) (bool, error) {
	return false, errors.New("connection refused")
}
