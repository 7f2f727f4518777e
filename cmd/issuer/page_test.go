package main

import (
	"errors"
	"slices"
	"testing"
)

// TestEachPage: every page is fetched with the previous page's cursor, every
// item is handed on in order, and an error of either side stops the walk.
func TestEachPage(t *testing.T) {
	pages := map[string]struct {
		items []int
		next  string
	}{"": {[]int{1, 2}, "b"}, "b": {[]int{3}, "c"}, "c": {nil, "d"}, "d": {[]int{4}, ""}}
	var cursors []string
	var got []int
	err := eachPage(func(c string) ([]int, string, error) {
		cursors = append(cursors, c)
		p := pages[c]
		return p.items, p.next, nil
	}, func(x int) error { got = append(got, x); return nil })
	if err != nil || !slices.Equal(got, []int{1, 2, 3, 4}) || !slices.Equal(cursors, []string{"", "b", "c", "d"}) {
		t.Errorf("eachPage = %v, items %v, cursors %q; want nil, [1 2 3 4], [\"\" b c d]", err, got, cursors)
	}

	boom := errors.New("boom")
	calls := 0
	err = eachPage(func(string) ([]int, string, error) { calls++; return nil, "more", boom }, func(int) error { return nil })
	if !errors.Is(err, boom) || calls != 1 {
		t.Errorf("eachPage with a failing fetch = %v after %d calls, want boom after 1", err, calls)
	}
	got = nil
	err = eachPage(func(string) ([]int, string, error) { calls++; return []int{1, 2, 3}, "more", nil },
		func(x int) error { got = append(got, x); return boom })
	if !errors.Is(err, boom) || !slices.Equal(got, []int{1}) {
		t.Errorf("eachPage with a failing item = %v, items %v; want boom after the first", err, got)
	}
}
