package auth

import (
	"testing"
	"time"
)

// FuzzDecodeCursor: a cursor comes from the client, so any string must be
// refused cleanly or read as a position, never panic; and every cursor the
// issuer hands out reads back as the position it encodes, for its own list
// only.
func FuzzDecodeCursor(f *testing.F) {
	at := time.Date(2026, 11, 23, 10, 0, 0, 123456789, time.UTC)
	f.Add(encodeCursor(cursorAudit, at, "01a20816-22b2-73d7-ad01-63c529493604"), int64(0), "x")
	f.Add("", int64(1), "")
	f.Add("eyJsIjoiYXVkaXQifQ", int64(-62135596800), "id")
	f.Add("!!!", int64(253402300799), "\x00")
	f.Fuzz(func(t *testing.T, s string, unix int64, id string) {
		if at, gotID, err := decodeCursor(cursorAudit, s); err == nil && (at.IsZero() || gotID == "" || at.Location() != time.UTC) {
			t.Fatalf("decodeCursor(%q) = %v, %q: a position without a time or an id", s, at, gotID)
		}

		// Round trip of what encodeCursor is given: times from the
		// database (years 1 to 9999) and ids it stored.
		if unix < -62135596800 || unix > 253402300799 || id == "" || !validText(id, maxFilterLen) {
			return
		}
		want := time.Unix(unix, 0).UTC()
		if want.IsZero() {
			return
		}
		c := encodeCursor(cursorUsers, want, id)
		got, gotID, err := decodeCursor(cursorUsers, c)
		if err != nil || !got.Equal(want) || gotID != id {
			t.Fatalf("round trip of (%v, %q) = %v, %q, %v", want, id, got, gotID, err)
		}
		if _, _, err := decodeCursor(cursorSessions, c); err == nil {
			t.Fatalf("a users cursor was accepted for the sessions list")
		}
	})
}
