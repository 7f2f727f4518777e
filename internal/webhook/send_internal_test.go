package webhook

import (
	"bytes"
	"net/http"
	"testing"
	"time"
)

func TestRetryAfterHeader(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Duration
	}{
		{"", 0},
		{"0", 0},
		{"-5", 0},
		{"120", 120 * time.Second},
		{" 7 ", 7 * time.Second},
		{"99999999999999999", time.Hour},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{now.Add(-time.Hour).Format(http.TimeFormat), 0},
		{now.Add(48 * time.Hour).Format(http.TimeFormat), time.Hour},
		{"soon", 0},
	} {
		if got := retryAfter(tc.in, now, time.Hour); got != tc.want {
			t.Errorf("retryAfter(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestRetryDelay(t *testing.T) {
	for _, tc := range []struct {
		name    string
		rand    byte
		attempt int
		asked   time.Duration
		want    time.Duration
	}{
		{"zero draw is floored", 0x00, 1, 0, time.Second},
		{"top draw, first retry", 0xff, 1, 0, 30 * time.Second},
		{"top draw, fourth retry", 0xff, 4, 0, 240 * time.Second},
		{"capped", 0xff, 30, 0, time.Hour},
		{"retry-after wins", 0x00, 5, 90 * time.Second, 90 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &Dispatcher{cfg: Config{RetryBackoff: 30 * time.Second, MaxBackoff: time.Hour}.withDefaults(),
				rand: bytes.NewReader(bytes.Repeat([]byte{tc.rand}, 8))}
			got := d.retryDelay(tc.attempt, tc.asked)
			// A top draw is just below the ceiling.
			if got > tc.want || got < tc.want-time.Millisecond {
				t.Errorf("retryDelay(%d, %v) = %v, want %v", tc.attempt, tc.asked, got, tc.want)
			}
		})
	}
}

func TestExcerpt(t *testing.T) {
	for in, want := range map[string]string{
		"":                             "",
		"  \n":                         "",
		"bad\x00 request\n\tnow":       ": bad request  now",
		string([]byte{0xff, 'o', 'k'}): ": ok",
	} {
		if got := excerpt([]byte(in)); got != want {
			t.Errorf("excerpt(%q) = %q, want %q", in, got, want)
		}
	}
}
