package proxy_test

import (
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/palisade-auth/palisade/internal/httpserver"
	"github.com/palisade-auth/palisade/internal/proxy"
	"github.com/palisade-auth/palisade/pkg/verify/verifytest"
)

// h2cClient speaks HTTP/2 with prior knowledge, as a gRPC client does. It
// sends no Accept-Encoding of its own. Its connections close before the
// servers started earlier shut down, which would otherwise give them a
// second's grace after GOAWAY.
func h2cClient(t *testing.T) *http.Client {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &p, DisableCompression: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// h2cApp serves h over HTTP/1.1 and h2c until the test ends.
func h2cApp(t *testing.T, h http.HandlerFunc) *url.URL {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	srv.Config.Protocols = &p
	srv.Start()
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	return u
}

// With either upstream protocol the app gets the client's Accept-Encoding,
// or none, and the client gets the body as the app encoded it. The h2c
// transport used to ask for gzip itself and decompress in between.
func TestNoTransparentCompression(t *testing.T) {
	const text = "hello hello hello"
	ks := verifytest.NewKeySet(t)
	for _, protocol := range []string{proxy.UpstreamHTTP1, proxy.UpstreamH2C} {
		t.Run(protocol, func(t *testing.T) {
			seen := make(chan string, 1)
			u := h2cApp(t, func(w http.ResponseWriter, r *http.Request) {
				seen <- r.Header.Get("Accept-Encoding")
				if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
					w.Header().Set("Content-Encoding", "gzip")
					zw := gzip.NewWriter(w)
					zw.Write([]byte(text))
					zw.Close()
					return
				}
				w.Write([]byte(text))
			})
			addr := h2cVerifier(t, ks.Verifier(t), u, protocol)
			req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/orders", strings.NewReader("{}"))
			req.Header.Set("Authorization", "Bearer "+ks.Token(t, "user-1"))
			resp, err := h2cClient(t).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if ae := <-seen; ae != "" {
				t.Errorf("app saw Accept-Encoding %q; the client sent none", ae)
			}
			if resp.StatusCode != http.StatusOK || string(body) != text || resp.Header.Get("Content-Encoding") != "" {
				t.Errorf("answer = %d %q (Content-Encoding %q), want 200 %q as the app sent it", resp.StatusCode, body, resp.Header.Get("Content-Encoding"), text)
			}
		})
	}
}

// A client's request trailers never reach the app, names or values: they
// arrive after the body, beyond the identity check, and a trailer frame
// ends a grpc-go server's whole connection. They used to arrive as names
// without values.
func TestRequestTrailersAreNotPassedOn(t *testing.T) {
	ks := verifytest.NewKeySet(t)
	for _, protocol := range []string{proxy.UpstreamHTTP1, proxy.UpstreamH2C} {
		t.Run(protocol, func(t *testing.T) {
			got := make(chan http.Header, 1)
			u := h2cApp(t, func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				got <- r.Trailer.Clone()
			})
			addr := h2cVerifier(t, ks.Verifier(t), u, protocol)
			req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/orders", io.NopCloser(strings.NewReader("body")))
			req.Header.Set("Authorization", "Bearer "+ks.Token(t, "user-1"))
			req.Trailer = http.Header{"X-Checksum": {"abc123"}, proxy.HeaderUserID: {"admin"}}
			resp, err := h2cClient(t).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("POST with trailers = %d, want 200", resp.StatusCode)
			}
			if tr := <-got; len(tr) != 0 {
				t.Errorf("app saw request trailers %q, want none", tr)
			}
		})
	}
}

// Every answer carries the verifier's X-Request-Id, one the app preceded
// with 103 Early Hints too: ReverseProxy clears the header map after
// relaying a 1xx, and the bodiless fast path deleted what the 1xx named,
// the app's own X-Request-Id among it.
func TestRequestIDSurvivesEarlyHints(t *testing.T) {
	ks := verifytest.NewKeySet(t)
	u := h2cApp(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</a.css>; rel=preload")
		w.Header().Set(httpserver.HeaderRequestID, "app-id")
		w.WriteHeader(http.StatusEarlyHints)
		w.Header().Del("Link")
		w.Header().Del(httpserver.HeaderRequestID)
		w.Write([]byte("ok"))
	})
	addr := h2cVerifier(t, ks.Verifier(t), u, proxy.UpstreamHTTP1)
	for _, method := range []string{http.MethodGet, http.MethodPost} { // the bodiless fast path, then ReverseProxy
		req, _ := http.NewRequest(method, "http://"+addr+"/orders", strings.NewReader("x"))
		if method == http.MethodGet {
			req.Body, req.ContentLength = nil, 0
		}
		req.Header.Set("Authorization", "Bearer "+ks.Token(t, "user-1"))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if ids := resp.Header.Values(httpserver.HeaderRequestID); resp.StatusCode != http.StatusOK || len(ids) != 1 || ids[0] == "" || ids[0] == "app-id" {
			t.Errorf("%s after a 103 = %d with X-Request-Id %q, want 200 with the verifier's id alone", method, resp.StatusCode, ids)
		}
	}
}

// The app's response trailers reach an HTTP/1.1 client through an h2c
// upstream too. An HTTP/2 answer may carry a Content-Length beside its
// trailers; copied to the HTTP/1.1 answer, it meant a body without chunks,
// which has no room for trailers, and they were lost: those it announced,
// and those it did not, sent to a client that accepts trailers. A HEAD
// answer keeps its length.
func TestResponseTrailersReachHTTP1Clients(t *testing.T) {
	ks := verifytest.NewKeySet(t)
	u := h2cApp(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/announced" {
			w.Header().Set("Trailer", "X-Checksum")
		}
		w.Header().Set("Content-Length", "5")
		w.Write([]byte("hello"))
		w.Header().Set(http.TrailerPrefix+"X-Checksum", "abc")
	})
	addr := h2cVerifier(t, ks.Verifier(t), u, proxy.UpstreamH2C)
	do := func(method, path string, te bool) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(method, "http://"+addr+path, nil)
		req.Header.Set("Authorization", "Bearer "+ks.Token(t, "user-1"))
		if te {
			req.Header.Set("Te", "trailers")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		return resp, string(body)
	}
	for _, tc := range []struct {
		path string
		te   bool
	}{{"/announced", false}, {"/unannounced", true}} {
		resp, body := do(http.MethodGet, tc.path, tc.te)
		if body != "hello" || resp.Trailer.Get("X-Checksum") != "abc" {
			t.Errorf("GET %s over HTTP/1.1 = %q, trailers %v; want hello and X-Checksum: abc", tc.path, body, resp.Trailer)
		}
	}
	if resp, _ := do(http.MethodHead, "/announced", true); resp.ContentLength != 5 {
		t.Errorf("HEAD over HTTP/1.1: Content-Length %d, want the app's 5", resp.ContentLength)
	}
}

// A 304 from an h2c app whose Content-Length gives the representation's
// size, as RFC 9110 allows, reaches the client as a 304: Go's HTTP/2
// transport waited for that many bytes, and the verifier reset the answer.
func TestNotModifiedWithALengthFromAnH2CApp(t *testing.T) {
	ks := verifytest.NewKeySet(t)
	u := h2cApp(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1234")
		w.Header().Set("ETag", `"v1"`)
		w.WriteHeader(http.StatusNotModified)
	})
	addr := h2cVerifier(t, ks.Verifier(t), u, proxy.UpstreamH2C)
	for name, c := range map[string]*http.Client{"HTTP/1.1": http.DefaultClient, "h2c": h2cClient(t)} {
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/doc", nil)
		req.Header.Set("Authorization", "Bearer "+ks.Token(t, "user-1"))
		req.Header.Set("If-None-Match", `"v1"`)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotModified || err != nil || resp.Header.Get("ETag") != `"v1"` {
			t.Errorf("%s: %d, ETag %q, body read %v; want 304 with the app's ETag", name, resp.StatusCode, resp.Header.Get("ETag"), err)
		}
	}
}
