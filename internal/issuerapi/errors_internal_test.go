package issuerapi

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/palisade-auth/palisade/internal/httpserver"
)

// An error that is the request's own context ending (its client hung up
// while a query ran) is answered 499 and logged as no failure; the same
// error on a request still live is a fault of ours: 500, logged.
func TestWriteErrorTellsAHangUpFromAFault(t *testing.T) {
	var logs bytes.Buffer
	a := New(Deps{Logger: slog.New(slog.NewJSONHandler(&logs, nil))}, Config{})
	err := fmt.Errorf("load user: %w", context.Canceled)

	gone, cancel := context.WithCancel(context.Background())
	cancel()
	w := httptest.NewRecorder()
	a.writeError(w, httptest.NewRequestWithContext(gone, "GET", "/v1/me", nil), err)
	if w.Code != httpserver.StatusClientClosedRequest || strings.Contains(logs.String(), "request failed") {
		t.Errorf("the request's own context ended = %d, log %q; want 499 and no failure logged", w.Code, logs.String())
	}

	w = httptest.NewRecorder()
	a.writeError(w, httptest.NewRequest("GET", "/v1/me", nil), err)
	if w.Code != http.StatusInternalServerError || !strings.Contains(logs.String(), "request failed") {
		t.Errorf("a cancelled call on a live request = %d, log %q; want 500, logged", w.Code, logs.String())
	}
}
