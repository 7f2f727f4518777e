package ratelimit

import (
	"errors"
	"fmt"
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
