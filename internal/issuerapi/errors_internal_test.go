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

// A failure's log line names the path as the access line does, bounded: a
// client could make it any length (120 KB with 20,000 escaped bytes).
func TestWriteErrorBoundsThePath(t *testing.T) {
	var logs bytes.Buffer
	a := New(Deps{Logger: slog.New(slog.NewJSONHandler(&logs, nil))}, Config{})
	r := httptest.NewRequest("DELETE", "/v1/sessions/x", nil)
	r.URL.Path = "/v1/sessions/" + strings.Repeat("\x01", 20000)
	a.writeError(httptest.NewRecorder(), r, fmt.Errorf("database blip"))
	if !strings.Contains(logs.String(), "request failed") || logs.Len() > 2<<10 {
		t.Errorf("the failure's log line is %d bytes, want one within 2 KiB:\n%.300s", logs.Len(), logs.String())
	}
}
