package httpserver

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestAccessLogFields(t *testing.T) {
	logger, buf := newTestLogger()
	h := RequestID(AccessLog(logger, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, "hello")
	})))
	req := httptest.NewRequest(http.MethodPost, "/v1/login?token=secret-query", strings.NewReader(`{"password":"secret-body"}`))
	req.RemoteAddr = "192.0.2.7:41000"
	req.Header.Set("User-Agent", "palisade-test/1.0")
	req.Header.Set("Authorization", "Bearer secret-header")
	req.Header.Set("Cookie", "refresh=secret-cookie")
	req.Header.Set(HeaderRequestID, "req-42")
	h.ServeHTTP(httptest.NewRecorder(), req)

	lines := logLinesWithMsg(t, buf, "request")
	if len(lines) != 1 {
		t.Fatalf("AccessLog wrote %d request lines, want 1; log:\n%s", len(lines), buf.String())
	}
	line := lines[0]
	want := map[string]any{
		"level":       "INFO",
		"method":      "POST",
		"path":        "/v1/login",
		"status":      float64(201),
		"bytes":       float64(5),
		"request_id":  "req-42",
		"remote_addr": "192.0.2.7:41000",
		"user_agent":  "palisade-test/1.0",
	}
	for k, v := range want {
		if line[k] != v {
			t.Errorf("AccessLog line[%q] = %v, want %v", k, line[k], v)
		}
	}
	if v, ok := line["aborted"]; ok {
		t.Errorf("AccessLog line of a complete answer has aborted = %v", v)
	}
	if d, ok := line["duration_ms"].(float64); !ok || d < 0 {
		t.Errorf("AccessLog line[duration_ms] = %v, want a non-negative number", line["duration_ms"])
	}
	if strings.Contains(buf.String(), "secret") {
		t.Errorf("AccessLog leaked a query, header or body value into the log:\n%s", buf.String())
	}
}

func TestAccessLogStatusAndLevel(t *testing.T) {
	tests := []struct {
		name       string
		handler    http.HandlerFunc
		wantStatus float64
		wantBytes  float64
		wantLevel  string
	}{
		{
			name:       "implicit 200",
			handler:    func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") },
			wantStatus: 200, wantBytes: 2, wantLevel: "INFO",
		},
		{
			name:       "nothing written",
			handler:    func(http.ResponseWriter, *http.Request) {},
			wantStatus: 200, wantBytes: 0, wantLevel: "INFO",
		},
		{
			name:       "client error is info",
			handler:    func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNotFound) },
			wantStatus: 404, wantBytes: 0, wantLevel: "INFO",
		},
		{
			name:       "server error is error",
			handler:    func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) },
			wantStatus: 503, wantBytes: 0, wantLevel: "ERROR",
		},
		{
			name:       "501, the client's method, is info",
			handler:    func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNotImplemented) },
			wantStatus: 501, wantBytes: 0, wantLevel: "INFO",
		},
		{
			name: "early hints are not the status",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(http.StatusEarlyHints)
				w.WriteHeader(http.StatusAccepted)
			},
			wantStatus: 202, wantBytes: 0, wantLevel: "INFO",
		},
		{
			name: "second WriteHeader ignored",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(http.StatusConflict)
				w.WriteHeader(http.StatusOK)
			},
			wantStatus: 409, wantBytes: 0, wantLevel: "INFO",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logger, buf := newTestLogger()
			AccessLog(logger, tt.handler).ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/x", nil))
			lines := logLinesWithMsg(t, buf, "request")
			if len(lines) != 1 {
				t.Fatalf("AccessLog wrote %d request lines, want 1", len(lines))
			}
			if got := lines[0]["status"]; got != tt.wantStatus {
				t.Errorf("AccessLog status = %v, want %v", got, tt.wantStatus)
			}
			if got := lines[0]["bytes"]; got != tt.wantBytes {
				t.Errorf("AccessLog bytes = %v, want %v", got, tt.wantBytes)
			}
			if got := lines[0]["level"]; got != tt.wantLevel {
				t.Errorf("AccessLog level = %v, want %v", got, tt.wantLevel)
			}
		})
	}
}

func TestAccessLogPanicPassesThrough(t *testing.T) {
	logger, buf := newTestLogger()
	h := AccessLog(logger, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") }))
	func() {
		defer func() {
			if v := recover(); v != "boom" {
				t.Errorf("AccessLog let through panic %v, want boom", v)
			}
		}()
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/x", nil))
	}()
	lines := logLinesWithMsg(t, buf, "request")
	if len(lines) != 1 {
		t.Fatalf("AccessLog wrote %d request lines for a panic, want 1", len(lines))
	}
	if lines[0]["status"] != float64(500) || lines[0]["level"] != "ERROR" {
		t.Errorf("AccessLog(panic) status, level = %v, %v, want 500, ERROR", lines[0]["status"], lines[0]["level"])
	}
}

// TestAccessLogAbortedAnswer: an answer cut off after its head (the proxy
// ends one an upstream broke off with http.ErrAbortHandler) is logged with
// the status and bytes that went out, and says it was cut off.
func TestAccessLogAbortedAnswer(t *testing.T) {
	logger, buf := newTestLogger()
	h := AccessLog(logger, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "part")
		panic(http.ErrAbortHandler)
	}))
	func() {
		defer func() {
			if v := recover(); v != http.ErrAbortHandler {
				t.Errorf("AccessLog let through panic %v, want http.ErrAbortHandler", v)
			}
		}()
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/x", nil))
	}()
	lines := logLinesWithMsg(t, buf, "request")
	if len(lines) != 1 {
		t.Fatalf("AccessLog wrote %d request lines, want 1", len(lines))
	}
	if l := lines[0]; l["status"] != float64(200) || l["bytes"] != float64(4) || l["aborted"] != true {
		t.Errorf("AccessLog(cut-off answer) status, bytes, aborted = %v, %v, %v; want 200, 4, true", l["status"], l["bytes"], l["aborted"])
	}
}

func TestAccessLogOutsideRequestID(t *testing.T) {
	logger, buf := newTestLogger()
	h := AccessLog(logger, RequestID(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
	req := httptest.NewRequest(http.MethodGet, "/x", nil)
	req.Header.Set(HeaderRequestID, "outer-1")
	h.ServeHTTP(httptest.NewRecorder(), req)
	lines := logLinesWithMsg(t, buf, "request")
	if len(lines) != 1 || lines[0]["request_id"] != "outer-1" {
		t.Errorf("AccessLog outside RequestID logged %v, want one line with request_id outer-1", lines)
	}
}

// The fields a client chooses are cut to their bounds as written, escapes
// included: a line stays within 2 KiB however long the request's method,
// path or user agent, and whatever bytes they hold.
func TestAccessLogBoundsClientFields(t *testing.T) {
	for name, fill := range map[string]string{"plain": "u", "NUL": "\x00", "not UTF-8": "\xff", "quotes": `"`, "line separators": "\u2028"} {
		t.Run(name, func(t *testing.T) {
			logger, buf := newTestLogger()
			req := httptest.NewRequest(http.MethodGet, "/x", nil)
			req.URL.Path = "/" + strings.Repeat(fill, 20000)
			req.Method = strings.Repeat(fill, 5000)
			req.Header.Set("User-Agent", strings.Repeat(fill, 1000))
			AccessLog(logger, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})).ServeHTTP(httptest.NewRecorder(), req)
			lines := logLinesWithMsg(t, buf, "request")
			if len(lines) != 1 {
				t.Fatalf("AccessLog wrote %d request lines, want 1", len(lines))
			}
			if n := len(buf.String()); n > 2<<10 {
				t.Errorf("the access line is %d bytes, want it within 2 KiB", n)
			}
			if fill != "u" {
				return
			}
			for field, want := range map[string]int{"user_agent": maxUserAgentLen, "path": maxPathLen, "method": maxMethodLen} {
				if v, _ := lines[0][field].(string); len(v) != want {
					t.Errorf("AccessLog %s length = %d, want %d", field, len(v), want)
				}
			}
		})
	}
}

func TestClipCutsByEscapedWidth(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"abcdef", 4, "abcd"},
		{"ab\x00cd", 7, "ab"},     // the NUL takes six: 8 > 7
		{"ab\x00cd", 8, "ab\x00"}, // exactly
		{`a"b`, 2, "a"},           // the quote takes two
		{"aé", 3, "aé"},           // é is two bytes, written as they are
		{"a\xffb", 6, "a"},        // a byte that is no UTF-8 becomes \ufffd, six
		{"short", 100, "short"},
	} {
		if got := clip(tc.s, tc.n); got != tc.want {
			t.Errorf("clip(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}
}

// serveLogged runs handler behind AccessLog on a real loopback server and
// returns the server plus a channel closed once the access log line is out.
func serveLogged(t *testing.T, handler http.HandlerFunc) (*httptest.Server, *syncBuffer, <-chan struct{}) {
	t.Helper()
	logger, buf := newTestLogger()
	logged := make(chan struct{}, 1)
	h := AccessLog(logger, handler)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r)
		logged <- struct{}{}
	}))
	t.Cleanup(srv.Close)
	return srv, buf, logged
}

func TestAccessLogKeepsWriterFeatures(t *testing.T) {
	srv, _, logged := serveLogged(t, func(w http.ResponseWriter, _ *http.Request) {
		if _, ok := w.(http.Flusher); !ok {
			t.Error("wrapped writer is not an http.Flusher")
		}
		if _, ok := w.(http.Hijacker); !ok {
			t.Error("wrapped writer is not an http.Hijacker")
		}
		rc := http.NewResponseController(w)
		// SetWriteDeadline is not implemented by the wrapper: it only
		// works when ResponseController reaches the server's writer
		// through Unwrap.
		if err := rc.SetWriteDeadline(time.Now().Add(time.Minute)); err != nil {
			t.Errorf("ResponseController.SetWriteDeadline through the wrapper = %v, want nil", err)
		}
		_, _ = io.WriteString(w, "part")
		if err := rc.Flush(); err != nil {
			t.Errorf("ResponseController.Flush through the wrapper = %v, want nil", err)
		}
	})
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	<-logged
	if resp.StatusCode != http.StatusOK || string(body) != "part" {
		t.Errorf("GET = %d %q, want 200 \"part\"", resp.StatusCode, body)
	}
}

func TestAccessLogHijack(t *testing.T) {
	srv, buf, logged := serveLogged(t, func(w http.ResponseWriter, _ *http.Request) {
		conn, rw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("Hijack through the wrapper = %v, want nil", err)
			return
		}
		defer conn.Close()
		_, _ = rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\nhello")
		_ = rw.Flush()
	})
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Errorf("upgrade status = %d, want 101", resp.StatusCode)
	}
	<-logged
	lines := logLinesWithMsg(t, buf, "request")
	if len(lines) != 1 || lines[0]["status"] != float64(101) {
		t.Errorf("AccessLog(hijacked) = %v, want one line with status 101", lines)
	}
}

// A gRPC call answers HTTP 200 whether it succeeded or not: its line
// carries the grpc-status, from a trailers-only header or from a trailer
// set after the body (announced, or with http.TrailerPrefix).
func TestAccessLogGRPCStatus(t *testing.T) {
	tests := []struct {
		name        string
		contentType string
		handler     http.HandlerFunc
		want        any // nil: no grpc_status in the line
	}{
		{"trailers-only refusal", "application/grpc", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Grpc-Status", "16")
			w.WriteHeader(http.StatusOK)
		}, float64(16)},
		{"announced trailer", "application/grpc+proto", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Trailer", "Grpc-Status")
			w.WriteHeader(http.StatusOK)
			io.WriteString(w, "message")
			w.Header().Set("Grpc-Status", "5")
		}, float64(5)},
		{"trailer named after the body", "application/grpc", func(w http.ResponseWriter, _ *http.Request) {
			io.WriteString(w, "message")
			w.Header().Set(http.TrailerPrefix+"Grpc-Status", "0")
		}, float64(0)},
		{"media type in capitals", "Application/GRPC", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Grpc-Status", "16")
		}, float64(16)},
		{"call cut off before any status", "application/grpc", func(w http.ResponseWriter, _ *http.Request) {
			io.WriteString(w, "message")
		}, nil},
		{"not a gRPC request", "application/json", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Grpc-Status", "16")
		}, nil},
		{"status that is no number", "application/grpc", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Grpc-Status", "sixteen")
		}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			logger, buf := newTestLogger()
			req := httptest.NewRequest(http.MethodPost, "/grpc.health.v1.Health/Check", nil)
			req.Header.Set("Content-Type", tc.contentType)
			AccessLog(logger, tc.handler).ServeHTTP(httptest.NewRecorder(), req)
			lines := logLinesWithMsg(t, buf, "request")
			if len(lines) != 1 {
				t.Fatalf("%d request lines, want 1", len(lines))
			}
			got, ok := lines[0]["grpc_status"]
			if tc.want == nil && ok || tc.want != nil && got != tc.want {
				t.Errorf("grpc_status = %v (present: %v), want %v", got, ok, tc.want)
			}
			if lines[0]["status"] != float64(200) {
				t.Errorf("status = %v, want 200", lines[0]["status"])
			}
		})
	}
}
