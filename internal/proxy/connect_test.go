package proxy_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/palisade-auth/palisade/internal/httpserver"
)

// TestUnforwardableRequestsNeverReachTheApp: a CONNECT, with a valid
// token, over HTTP/1.1 or HTTP/2, and a request whose target is not a
// path are answered by the verifier, never forwarded. Before, an HTTP/2
// CONNECT opened a tunnel into an h2c app past which the verifier saw no
// request, and "GET host:80" reached an HTTP/1.1 app as "GET 80".
func TestUnforwardableRequestsNeverReachTheApp(t *testing.T) {
	for _, protocol := range upstreamProtocols {
		t.Run(protocol, func(t *testing.T) {
			var mu sync.Mutex
			var reached []string
			addr, tok := appBehind(t, protocol, func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				reached = append(reached, r.Method+" "+r.RequestURI)
				mu.Unlock()
			}, httpserver.Options{})
			auth := "Authorization: Bearer " + tok + "\r\n"
			for _, tc := range []struct{ head, code string }{
				{"CONNECT app.example:443 HTTP/1.1\r\nHost: app.example:443\r\n" + auth + "\r\n", "not_implemented"},
				{"GET app.example:80 HTTP/1.1\r\nHost: app.example\r\n" + auth + "\r\n", "malformed_request"},
				{"GET mailto:someone HTTP/1.1\r\nHost: app.example\r\n" + auth + "\r\n", "malformed_request"},
				{"GET * HTTP/1.1\r\nHost: app.example\r\n" + auth + "\r\n", "malformed_request"},
			} {
				_, br := rawHTTP1(t, addr, tc.head)
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					t.Fatalf("%q: %v", strings.SplitN(tc.head, "\r\n", 2)[0], err)
				}
				checkProblem(t, strings.SplitN(tc.head, "\r\n", 2)[0], resp, tc.code)
			}

			// HTTP/2: a CONNECT stream, the client's bytes to follow.
			body, send := io.Pipe()
			defer send.Close()
			req, _ := http.NewRequestWithContext(callCtx(t), http.MethodConnect, "http://"+addr, body)
			req.Host = "app.example:443"
			req.Header.Set("Authorization", "Bearer "+tok)
			resp, err := h2cClient(t).Do(req)
			if err != nil {
				t.Fatalf("HTTP/2 CONNECT: %v", err)
			}
			checkProblem(t, "HTTP/2 CONNECT", resp, "not_implemented")

			// A path is forwarded as ever.
			_, br := rawHTTP1(t, addr, "GET /after HTTP/1.1\r\nHost: app.example\r\n"+auth+"\r\n")
			if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("a path after them: %v %v", resp, err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(reached) != 1 || reached[0] != "GET /after" {
				t.Fatalf("the app saw %q; want only GET /after", reached)
			}
		})
	}
}

func checkProblem(t *testing.T, what string, resp *http.Response, code string) {
	t.Helper()
	defer resp.Body.Close()
	var prob struct {
		Code   string
		Status int
	}
	err := json.NewDecoder(resp.Body).Decode(&prob)
	if err != nil || prob.Code != code || prob.Status != resp.StatusCode || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") {
		t.Errorf("%q: answered %d %+v (%v); want problem %q", what, resp.StatusCode, prob, err, code)
	}
}
