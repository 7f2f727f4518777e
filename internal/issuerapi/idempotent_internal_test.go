package issuerapi

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/palisade-auth/palisade/internal/apperr"
	"github.com/palisade-auth/palisade/internal/clocktest"
	"github.com/palisade-auth/palisade/internal/httpserver"
	"github.com/palisade-auth/palisade/internal/idempotency"
	"github.com/palisade-auth/palisade/internal/testdb"
)

// TestIdempotentClientGone: a client that goes away while its request runs
// still has the answer remembered, or the key freed after our failure, so
// that its retry gets the answer or runs again instead of
// idempotency_key_in_progress.
func TestIdempotentClientGone(t *testing.T) {
	for _, db := range []struct {
		name string
		url  func(testing.TB) string
	}{{"SQLite", testdb.SQLite}, {"PostgreSQL", testdb.Postgres}} {
		t.Run(db.name, func(t *testing.T) {
			clk := clocktest.New(time.Date(2025, 3, 14, 15, 9, 26, 0, time.UTC))
			a := &API{
				idem: idempotency.New(testdb.Store(t, db.url(t)), clk.Now),
				log:  slog.New(slog.NewTextHandler(io.Discard, nil)),
				cfg:  Config{MaxBodyBytes: 1 << 16},
			}
			send := func(key string, run func(cancel func()) (int, any, error)) *httptest.ResponseRecorder {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				r := httptest.NewRequestWithContext(ctx, "POST", "/v1/register", strings.NewReader(`{"email":"a@example.com"}`))
				r.Header.Set("Content-Type", "application/json")
				r.Header.Set("Idempotency-Key", key)
				w := httptest.NewRecorder()
				// Under the access log, as served: a client gone is
				// written nothing (httpserver.ClientGone), not 499.
				httpserver.AccessLog(a.log, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					a.idempotent(w, r, "register", func([]byte) (int, any, error) { return run(cancel) })
				})).ServeHTTP(w, r)
				return w
			}
			created := func(cancel func()) (int, any, error) {
				cancel()
				return http.StatusCreated, map[string]string{"id": "u1"}, nil
			}
			failed := func(cancel func()) (int, any, error) {
				cancel()
				return 0, nil, apperr.Internal(context.Canceled)
			}
			again := func(func()) (int, any, error) {
				return http.StatusCreated, map[string]string{"id": "u2"}, nil
			}

			send("completed", created)
			if w := send("completed", again); w.Code != http.StatusCreated || w.Header().Get("Idempotent-Replayed") != "true" || !strings.Contains(w.Body.String(), "u1") {
				t.Errorf("retry after the client went away = %d %s (Idempotent-Replayed %q), want the replay of 201 u1",
					w.Code, w.Body, w.Header().Get("Idempotent-Replayed"))
			}
			send("released", failed)
			if w := send("released", again); w.Code != http.StatusCreated || w.Header().Get("Idempotent-Replayed") != "" || !strings.Contains(w.Body.String(), "u2") {
				t.Errorf("retry after a failure whose client went away = %d %s (Idempotent-Replayed %q), want a fresh 201 u2",
					w.Code, w.Body, w.Header().Get("Idempotent-Replayed"))
			}
		})
	}
}
