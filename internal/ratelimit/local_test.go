package ratelimit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
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

// A limit's store failures are logged at most once a second, each line
// saying how many were not since the one before; each limit has its own
// lines, and the metric counts every failure.
func TestStoreFailuresLoggedOncePerInterval(t *testing.T) {
	var out bytes.Buffer
	l, err := New(failingStore{}, nil, time.Now, slog.New(slog.NewJSONHandler(&out, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	lines := func() []map[string]any {
		var recs []map[string]any
		for line := range strings.Lines(out.String()) {
			var rec map[string]any
			if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == "rate limit store failed" {
				recs = append(recs, rec)
			}
		}
		return recs
	}
	for i := range 20 {
		_, _ = l.Allow(t.Context(), Register, fmt.Sprint("client-", i))
	}
	_, _ = l.Allow(t.Context(), Login, "client")
	if got := lines(); len(got) != 2 || got[0]["limit"] != Register || got[1]["limit"] != Login {
		t.Fatalf("lines after 20 failures of register and one of login = %v, want one each", got)
	}
	l.failLogs[Register].last.Store(time.Now().Add(-failLogEvery).UnixNano()) // a second on
	_, _ = l.Allow(t.Context(), Register, "client-20")
	got := lines()
	if len(got) != 3 || got[2]["limit"] != Register || got[2]["unlogged_before"] != float64(19) {
		t.Errorf("the line a second on = %v, want register's, saying 19 were not logged", got[len(got)-1])
	}
}
