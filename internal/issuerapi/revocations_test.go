package issuerapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/palisade-auth/palisade/internal/auth"
	"github.com/palisade-auth/palisade/internal/clocktest"
	"github.com/palisade-auth/palisade/internal/store"
	"github.com/palisade-auth/palisade/internal/testdb"
)

func TestETagMatch(t *testing.T) {
	const etag = `"abc"`
	for _, tc := range []struct {
		header string
		want   bool
	}{
		{`"abc"`, true},
		{`W/"abc"`, true},
		{`"x", "abc"`, true},
		{`"x",W/"abc"`, true},
		{`*`, true},
		{``, false},
		{`"abd"`, false},
		{`abc`, false},
		{`"x"`, false},
	} {
		if got := etagMatch(tc.header, etag); got != tc.want {
			t.Errorf("etagMatch(%q, %q) = %v, want %v", tc.header, etag, got, tc.want)
		}
	}
}

// TestRevocationsHandler runs the handler over a real feed with an
// injected clock: the answer's shape and headers, until, a delta, 304 and
// a malformed cursor.
func TestRevocationsHandler(t *testing.T) {
	for _, db := range []struct {
		name string
		url  func(testing.TB) string
	}{{"SQLite", testdb.SQLite}, {"PostgreSQL", testdb.Postgres}} {
		t.Run(db.name, func(t *testing.T) {
			st := testdb.Store(t, db.url(t))
			clk := clocktest.New(time.Date(2026, 1, 2, 3, 4, 5, 600_000_000, time.UTC))
			log := slog.New(slog.NewTextHandler(io.Discard, nil))
			a := New(Deps{Revocations: auth.NewRevocationFeed(st, 15*time.Minute, 30*time.Second, make([]byte, 32), clk.Now, log), Logger: log}, Config{})
			get := func(query string, headers ...string) *httptest.ResponseRecorder {
				t.Helper()
				r := httptest.NewRequest("GET", "/v1/revocations"+query, nil)
				for i := 0; i+1 < len(headers); i += 2 {
					r.Header.Set(headers[i], headers[i+1])
				}
				w := httptest.NewRecorder()
				a.revocations(w, r)
				return w
			}

			first := get("")
			if first.Code != http.StatusOK || first.Header().Get("Cache-Control") != "no-cache" || first.Header().Get("ETag") == "" {
				t.Fatalf("GET = %d, Cache-Control %q, ETag %q; want 200, no-cache and an ETag", first.Code, first.Header().Get("Cache-Control"), first.Header().Get("ETag"))
			}
			cursor := cursorOf(t, first.Body.String())
			if want := `{"sessions":[],"keys":[],"cursor":"` + cursor + `"}` + "\n"; first.Body.String() != want {
				t.Errorf("GET of an empty feed = %s, want %s", first.Body, want)
			}

			if err := st.AppendRevocation(t.Context(), store.RevokedKey, "kid-1", clk.Now()); err != nil {
				t.Fatal(err)
			}
			delta := get("?after="+cursor, "If-None-Match", first.Header().Get("ETag"))
			next := cursorOf(t, delta.Body.String())
			// 03:04:05.6 + 15m30s = 03:19:35.6, rounded up.
			if want := `{"sessions":[],"keys":[{"kid":"kid-1","until":"2026-01-02T03:19:36Z"}],"cursor":"` + next + `"}` + "\n"; delta.Code != http.StatusOK || delta.Body.String() != want {
				t.Errorf("GET ?after= after a key revocation = %d %s, want 200 %s", delta.Code, delta.Body, want)
			}

			etag := delta.Header().Get("ETag")
			if w := get("?after="+next, "If-None-Match", etag); w.Code != http.StatusNotModified || w.Header().Get("ETag") != etag || w.Body.Len() != 0 {
				t.Errorf("GET ?after=<latest> with If-None-Match = %d, ETag %q, body %q; want 304, %q, none", w.Code, w.Header().Get("ETag"), w.Body, etag)
			}
			if w := get("?after="+next, "If-None-Match", first.Header().Get("ETag")); w.Code != http.StatusOK {
				t.Errorf("GET ?after=<latest> with an older ETag = %d, want 200", w.Code)
			}

			// A cursor more than a thousand entries behind, or older than
			// the window, is answered with the whole list (built once for
			// every reader asking at the same time).
			err := st.InTx(t.Context(), func(q store.Queries) error {
				for i := range 1001 {
					if err := q.AppendRevocation(t.Context(), store.RevokedKey, fmt.Sprintf("bulk-%04d", i), clk.Now()); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			whole := get("")
			if w := get("?after=" + next); w.Code != http.StatusOK || entriesOf(w.Body.String()) != entriesOf(whole.Body.String()) || strings.Count(w.Body.String(), `"kid"`) != 1002 {
				t.Errorf("GET ?after=<1,001 entries behind> = %d with %d keys, want 200 and the whole list's 1,002", w.Code, strings.Count(w.Body.String(), `"kid"`))
			}
			clk.Advance(15*time.Minute + 30*time.Second)
			if err := st.AppendRevocation(t.Context(), store.RevokedKey, "kid-2", clk.Now()); err != nil {
				t.Fatal(err)
			}
			if w := get("?after=" + cursorOf(t, whole.Body.String())); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"kid-2"`) || entriesOf(w.Body.String()) != entriesOf(get("").Body.String()) {
				t.Errorf("GET ?after=<older than the window> = %d %s, want 200 and the whole list", w.Code, w.Body)
			}

			for _, q := range []string{"?after=", "?after=zz%21", "?after=" + next + "&after=" + next} {
				w := get(q)
				if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), `"malformed_request"`) {
					t.Errorf("GET %s = %d %s, want 400 malformed_request", q, w.Code, w.Body)
				}
			}
		})
	}
}

// entriesOf is an answer without its cursor, which on PostgreSQL holds
// the read's snapshot and so differs between two reads of the same list.
func entriesOf(body string) string {
	entries, _, _ := strings.Cut(body, `"cursor":`)
	return entries
}

func cursorOf(t *testing.T, body string) string {
	t.Helper()
	_, rest, ok := strings.Cut(body, `"cursor":"`)
	cursor, _, ok2 := strings.Cut(rest, `"`)
	if !ok || !ok2 || cursor == "" {
		t.Fatalf("no cursor in %s", body)
	}
	return cursor
}

// TestReadmeRevocationsExample keeps the README's example answer in the
// shape the handler writes, with a cursor the feed accepts.
func TestReadmeRevocationsExample(t *testing.T) {
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(raw), "\n## Making logout reach every sidecar\n")
	_, block, ok2 := strings.Cut(section, "```json\n")
	block, _, ok3 := strings.Cut(block, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("README has no JSON example in \"Making logout reach every sidecar\"")
	}
	dec := json.NewDecoder(strings.NewReader(block))
	dec.DisallowUnknownFields()
	var v revocationsJSON
	if err := dec.Decode(&v); err != nil || len(v.Sessions) == 0 || v.Keys == nil || v.Cursor == "" {
		t.Fatalf("README example %s = %+v, %v; want the feed's shape with a session, keys and a cursor", block, v, err)
	}
	for _, s := range v.Sessions {
		if _, err := time.Parse(time.RFC3339, s.Until); err != nil || !strings.HasSuffix(s.Until, "Z") {
			t.Errorf("README example until %q: want RFC 3339 UTC", s.Until)
		}
	}
	st := testdb.Store(t, testdb.SQLite(t))
	feed := auth.NewRevocationFeed(st, 15*time.Minute, 30*time.Second, make([]byte, 32), time.Now, slog.New(slog.DiscardHandler))
	// A cursor of the feed: as old as it is, one to read the whole list on.
	if _, err := feed.List(t.Context(), v.Cursor); !errors.Is(err, auth.ErrWholeList) {
		t.Errorf("List(README example cursor) = %v, want ErrWholeList", err)
	}
}
