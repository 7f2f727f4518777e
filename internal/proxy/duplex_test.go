package proxy_test

import (
	"bufio"
	"crypto/sha256"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/palisade-auth/palisade/internal/httpserver"
	"github.com/palisade-auth/palisade/internal/proxy"
	"github.com/palisade-auth/palisade/internal/testnet"
	"github.com/palisade-auth/palisade/pkg/verify/verifytest"
)

// appBehind serves app (over HTTP/1.1 and h2c) behind a proxy that
// forwards to it with protocol, served with opts; it returns the proxy's
// address and a valid token.
func appBehind(t *testing.T, protocol string, app http.HandlerFunc, opts httpserver.Options) (addr, token string) {
	t.Helper()
	return appBehindWith(t, proxy.Config{Logger: slog.New(slog.DiscardHandler), UpstreamProtocol: protocol}, app, opts)
}

// appBehindWith is appBehind with the proxy's whole configuration.
func appBehindWith(t *testing.T, cfg proxy.Config, app http.HandlerFunc, opts httpserver.Options) (addr, token string) {
	t.Helper()
	ks := verifytest.NewKeySet(t)
	p := proxy.NewProxy(ks.Verifier(t), h2cApp(t, app), nil, cfg)
	return serveProxy(t, p, opts), ks.Token(t, "user-1")
}

// rawHTTP1 dials addr and sends head as written, for a client that
// writes HTTP/1.1 itself; reads and writes fail after 10 s.
func rawHTTP1(t *testing.T, addr, head string) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	return conn, bufio.NewReader(conn)
}

var upstreamProtocols = []string{proxy.UpstreamHTTP1, proxy.UpstreamH2C}

// TestUploadReachesAnAppThatAnswersFirst: an app may send its answer's
// head before it reads the body (a streaming exchange, a progress
// report). Its HTTP/1.1 client's upload must still reach it byte for
// byte. net/http, once the head went out, read off and threw away up to
// 256 KiB of the body the proxy was still forwarding, so the app got an
// upload with a hole in it and a clean end; here the client sends its
// body only after the head, so net/http waited for a body that could not
// come and the head never went out.
func TestUploadReachesAnAppThatAnswersFirst(t *testing.T) {
	app := func(w http.ResponseWriter, r *http.Request) {
		http.NewResponseController(w).EnableFullDuplex() // the app's own server, over HTTP/1.1
		w.WriteHeader(http.StatusOK)
		http.NewResponseController(w).Flush()
		h := sha256.New()
		n, err := io.Copy(h, r.Body)
		fmt.Fprintf(w, "%d %x %v", n, h.Sum(nil), err)
	}
	for _, protocol := range upstreamProtocols {
		t.Run(protocol, func(t *testing.T) {
			addr, tok := appBehind(t, protocol, app, httpserver.Options{BodyIdleTimeout: 30 * time.Second})
			conn, br := rawHTTP1(t, addr, "POST /stream HTTP/1.1\r\nHost: app\r\nAuthorization: Bearer "+tok+"\r\nTransfer-Encoding: chunked\r\n\r\n")
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("the app's head before the body: %v", err)
			}
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d; want the app's 200", resp.StatusCode)
			}
			h := sha256.New()
			const chunk, chunks = 16 << 10, 64
			for i := range chunks {
				b := []byte(strings.Repeat(string(rune('a'+i%26)), chunk))
				h.Write(b)
				fmt.Fprintf(conn, "%x\r\n%s\r\n", len(b), b)
			}
			io.WriteString(conn, "0\r\n\r\n")
			got, err := io.ReadAll(resp.Body)
			if want := fmt.Sprintf("%d %x <nil>", chunk*chunks, h.Sum(nil)); err != nil || string(got) != want {
				t.Fatalf("the app read %q, %v; want %q", got, err, want)
			}
		})
	}
}

// TestBrokenUploadEndsTheConnection: in full duplex net/http keeps a
// connection whose request body failed, so what a client sent after a
// malformed chunk would be read as its next request. The verifier closes
// the connection after such an answer instead: nothing after the broken
// body reaches the app. The client is told its body was malformed (400),
// and it is counted as such, not as the app's failure (a 502 and a
// warning, which any client could set off at will).
func TestBrokenUploadEndsTheConnection(t *testing.T) {
	for _, protocol := range upstreamProtocols {
		t.Run(protocol, func(t *testing.T) {
			var mu sync.Mutex
			var seen []string
			app := func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				seen = append(seen, r.Method+" "+r.URL.Path)
				mu.Unlock()
				io.Copy(io.Discard, r.Body)
			}
			logs := &lockedBuffer{}
			reg := prometheus.NewRegistry()
			cfg := proxy.Config{Logger: slog.New(slog.NewJSONHandler(logs, nil)), Metrics: proxy.NewMetrics(reg, func() float64 { return 0 }), UpstreamProtocol: protocol}
			addr, tok := appBehindWith(t, cfg, app, httpserver.Options{BodyIdleTimeout: 30 * time.Second})
			_, br := rawHTTP1(t, addr, "POST /upload HTTP/1.1\r\nHost: app\r\nAuthorization: Bearer "+tok+"\r\nTransfer-Encoding: chunked\r\n\r\n"+
				"5\r\nhello\r\nzz\r\n"+ // not a chunk size
				"GET /after HTTP/1.1\r\nHost: app\r\nAuthorization: Bearer "+tok+"\r\n\r\n")
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			checkProblem(t, "the broken upload", resp, "malformed_request")
			if !resp.Close {
				t.Errorf("answer to the broken upload %d without Connection: close", resp.StatusCode)
			}
			if got := failures(t, reg); got[proxy.FailureBadBody] != 1 || got[proxy.FailureUpstream] != 0 || strings.Contains(logs.String(), "upstream") {
				t.Errorf("verifier_proxy_failures_total = %v, log %s; want bad_body 1, no upstream failure", got, logs)
			}
			if rest, err := io.ReadAll(br); len(rest) > 0 || err != nil {
				t.Errorf("after the broken upload the connection gave %q, %v; want it closed", rest, err)
			}
			mu.Lock()
			defer mu.Unlock()
			if slices.Contains(seen, "GET /after") {
				t.Errorf("the app saw %q: what followed a broken body was read as a request", seen)
			}
		})
	}
}

// TestEarlyAnswerToAnOpenHTTP1Upload: an app that refuses an HTTP/1.1
// upload before reading it (413) while the client is still sending has
// its answer reach the client at once, with the connection closed, on
// either protocol and whether or not body timeouts are set. The proxy's
// side of the body used to wait for the client's next bytes, and the
// answer with it, until the idle timeout ran out (with h2c twice over).
func TestEarlyAnswerToAnOpenHTTP1Upload(t *testing.T) {
	app := func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		rc.EnableFullDuplex() // the app's own server answers without draining
		w.Header().Set("Content-Length", "10")
		w.WriteHeader(http.StatusRequestEntityTooLarge)
		io.WriteString(w, "too large\n")
		rc.Flush()     // the whole answer
		r.Body.Close() // in the handler, once the proxy ends the upload: golang/go#68560
	}
	for _, protocol := range upstreamProtocols {
		for name, opts := range map[string]httpserver.Options{"body timeouts": {BodyIdleTimeout: 30 * time.Second}, "none": {}} {
			t.Run(protocol+"/"+name, func(t *testing.T) {
				addr, tok := appBehind(t, protocol, app, opts)
				_, br := rawHTTP1(t, addr, "POST /upload HTTP/1.1\r\nHost: app\r\nAuthorization: Bearer "+tok+"\r\nContent-Length: 100000\r\n\r\nthe start")
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					t.Fatalf("with the upload open: %v; want the app's 413 at once", err)
				}
				body, _ := io.ReadAll(resp.Body)
				if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(body), "too large") || !resp.Close {
					t.Fatalf("with the upload open = %d %q (close %t); want the app's 413 and the connection closed", resp.StatusCode, body, resp.Close)
				}
			})
		}
	}
}

// TestKeepAliveUploads: uploads one after another on one connection, in
// full duplex, all reach the app and are answered on that connection. A
// server in full duplex that reads a body to its end after its handler
// has returned goes on reading and panics when it reads the next request
// (golang/go#68560), dropping the connection; the proxy reads and closes
// every body before it returns.
func TestKeepAliveUploads(t *testing.T) {
	for _, protocol := range upstreamProtocols {
		t.Run(protocol, func(t *testing.T) {
			addr, tok := appBehind(t, protocol, func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				fmt.Fprintf(w, "%d", len(b))
			}, httpserver.Options{BodyIdleTimeout: 30 * time.Second})
			conn, br := rawHTTP1(t, addr, "")
			for i := range 300 {
				body := strings.Repeat("x", i)
				fmt.Fprintf(conn, "POST /upload HTTP/1.1\r\nHost: app\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n%s", tok, len(body), body)
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					t.Fatalf("upload %d on the connection: %v", i, err)
				}
				got, _ := io.ReadAll(resp.Body)
				if resp.StatusCode != http.StatusOK || string(got) != fmt.Sprint(i) || resp.Close {
					t.Fatalf("upload %d = %d %q (close %t); want 200 %d and the connection kept", i, resp.StatusCode, got, resp.Close, i)
				}
			}
		})
	}
}

// uploadToFailingApp opens an upload of 100,000 bytes, of which the
// client sends 5,000 and then holds the rest, to an app that fails: over
// h2c the handler app (its stream is reset), over HTTP/1.1 a process
// scripted on the raw connection, which then dies (the connection
// closes). It returns the client's connection, the answer's reader and
// the proxy's metrics.
func uploadToFailingApp(t *testing.T, protocol string, app http.HandlerFunc, script func(net.Conn, *http.Request)) (net.Conn, *bufio.Reader, *prometheus.Registry) {
	t.Helper()
	addr, token, reg := failingAppBehind(t, protocol, app, script)
	conn, br := rawHTTP1(t, addr, "POST /upload HTTP/1.1\r\nHost: app\r\nAuthorization: Bearer "+token+"\r\nContent-Length: 100000\r\n\r\n"+strings.Repeat("x", uploadSent))
	return conn, br, reg
}

// failingAppBehind is the proxy of uploadToFailingApp: its address, a
// valid token and its metrics.
func failingAppBehind(t *testing.T, protocol string, app http.HandlerFunc, script func(net.Conn, *http.Request)) (addr, token string, reg *prometheus.Registry) {
	t.Helper()
	ks := verifytest.NewKeySet(t)
	up := h2cApp(t, app)
	if protocol == proxy.UpstreamHTTP1 {
		up, _ = url.Parse("http://" + testnet.Serve(t, func(c net.Conn) {
			if req, err := http.ReadRequest(bufio.NewReader(c)); err == nil {
				script(c, req)
			}
		}))
	}
	reg = prometheus.NewRegistry()
	p := proxy.NewProxy(ks.Verifier(t), up, nil, proxy.Config{Logger: slog.New(slog.DiscardHandler), Metrics: proxy.NewMetrics(reg, func() float64 { return 0 }), UpstreamProtocol: protocol})
	return serveProxy(t, p, httpserver.Options{BodyIdleTimeout: 30 * time.Second}), ks.Token(t, "user-1"), reg
}

// uploadSent is how much of its upload uploadToFailingApp's client sends.
// A script that answers reads all of it first: closing a connection with
// bytes unread resets it, and the reset can destroy the answer before the
// proxy has read it.
const uploadSent = 5000

// TestAppFailingMidUploadIsTheApps: an app that fails while a client's
// upload is open, with the client quiet for the moment, is answered 502
// at once and counted as the app's failure. The transport waited for the
// goroutine copying the body, which waited on the client, until the idle
// timeout, which then blamed the client (408).
func TestAppFailingMidUploadIsTheApps(t *testing.T) {
	for _, protocol := range upstreamProtocols {
		t.Run(protocol, func(t *testing.T) {
			_, br, reg := uploadToFailingApp(t, protocol, func(w http.ResponseWriter, r *http.Request) {
				io.ReadFull(r.Body, make([]byte, 1000))
				panic(http.ErrAbortHandler)
			}, func(c net.Conn, req *http.Request) {
				io.ReadFull(req.Body, make([]byte, 1000))
			})
			checkAppFailed(t, br, reg)
		})
	}
}

// checkAppFailed checks that the client, its upload open, was answered
// 502 (before the read deadline, 20 s short of the idle timeout's 408)
// and the failure counted as the app's.
func checkAppFailed(t *testing.T, br *bufio.Reader, reg *prometheus.Registry) {
	t.Helper()
	resp, err := http.ReadResponse(br, nil)
	checkBadGateway(t, resp, err, reg)
}

// checkBadGateway checks the answer of checkAppFailed.
func checkBadGateway(t *testing.T, resp *http.Response, err error, reg *prometheus.Registry) {
	t.Helper()
	if err != nil {
		t.Fatalf("the app failed with the upload open: %v; want 502 at once", err)
	}
	checkProblem(t, "the upload", resp, "bad_gateway")
	if got := failures(t, reg); got[proxy.FailureUpstream] != 1 || got[proxy.FailureBodyTimeout] != 0 || got[proxy.FailureClientGone] != 0 {
		t.Errorf("verifier_proxy_failures_total = %v; want one upstream failure", got)
	}
}

// TestHTTP2UploadToAFailingHTTP1App: an HTTP/2 client's upload, open and
// quiet, to an HTTP/1.1 app that dies (after a 103 or before) is answered
// 502 at once and counted as the app's failure. Only HTTP/1.1 clients'
// bodies could be let go of when the app's connection closed; this
// client waited for the idle timeout, whose 408 blamed it.
func TestHTTP2UploadToAFailingHTTP1App(t *testing.T) {
	for _, hint := range []bool{false, true} {
		t.Run(fmt.Sprintf("103=%t", hint), func(t *testing.T) {
			addr, token, reg := failingAppBehind(t, proxy.UpstreamHTTP1, nil, func(c net.Conn, req *http.Request) {
				io.ReadFull(req.Body, make([]byte, uploadSent))
				if hint {
					io.WriteString(c, "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n")
				}
			})
			body, upload := io.Pipe()
			defer upload.Close()
			go upload.Write(make([]byte, uploadSent)) // and then nothing, the upload open
			req, _ := http.NewRequest("POST", "http://"+addr+"/upload", body)
			req.Header.Set("Authorization", "Bearer "+token)
			client := h2cClient(t)
			client.Timeout = 10 * time.Second // 20 s short of the idle timeout
			resp, err := client.Do(req)
			checkBadGateway(t, resp, err, reg)
		})
	}
}

// TestAppFailingAfterAnInterimAnswerIsTheApps: an app that fails after
// a 1xx (103 Early Hints here), the client's upload open and quiet, is
// answered 502 at once, after the 1xx, and counted as the app's failure.
// The proxy took the 1xx for the answer's start, after which the app's
// failure was left to the transport, which waited for its read of the
// client's body until the idle timeout, and its 408 blamed the client.
func TestAppFailingAfterAnInterimAnswerIsTheApps(t *testing.T) {
	const hint = "</style.css>; rel=preload"
	for _, protocol := range upstreamProtocols {
		t.Run(protocol, func(t *testing.T) {
			_, br, reg := uploadToFailingApp(t, protocol, func(w http.ResponseWriter, r *http.Request) {
				io.ReadFull(r.Body, make([]byte, 1000))
				w.Header().Set("Link", hint)
				w.WriteHeader(http.StatusEarlyHints)
				panic(http.ErrAbortHandler)
			}, func(c net.Conn, req *http.Request) {
				io.ReadFull(req.Body, make([]byte, uploadSent))
				io.WriteString(c, "HTTP/1.1 103 Early Hints\r\nLink: "+hint+"\r\n\r\n")
			})
			interim, err := http.ReadResponse(br, nil)
			if err != nil || interim.StatusCode != http.StatusEarlyHints || interim.Header.Get("Link") != hint {
				t.Fatalf("first answer = %v, %v; want the app's 103", interim, err)
			}
			checkAppFailed(t, br, reg)
		})
	}
}

// TestAppBreakingOffAnEarlyAnswerIsTheApps: an app that breaks off the
// answer it began before the client's upload ended is counted as the
// app's failure, not as the client leaving: ending the client's body,
// once the answer stopped, cancelled the request before the count.
func TestAppBreakingOffAnEarlyAnswerIsTheApps(t *testing.T) {
	for _, protocol := range upstreamProtocols {
		t.Run(protocol, func(t *testing.T) {
			_, br, reg := uploadToFailingApp(t, protocol, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Length", "100")
				io.WriteString(w, "part")
				http.NewResponseController(w).Flush()
				panic(http.ErrAbortHandler)
			}, func(c net.Conn, req *http.Request) {
				io.ReadFull(req.Body, make([]byte, uploadSent))
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npart")
			})
			resp, err := http.ReadResponse(br, nil)
			if err == nil {
				_, err = io.ReadAll(resp.Body)
			}
			if err == nil {
				t.Fatalf("the answer the app broke off read to a clean end: %d %v", resp.StatusCode, failures(t, reg))
			}
			// Counted before the connection was dropped.
			if got := failures(t, reg); got[proxy.FailureUpstream] != 1 || got[proxy.FailureClientGone] != 0 {
				t.Errorf("verifier_proxy_failures_total = %v; want one upstream failure", got)
			}
		})
	}
}

// TestClientLeavingMidUploadIsTheClients: a client that leaves with its
// upload unfinished, the app not yet answering, is counted as gone, not
// as the app's failure, though the transport then closes the connection
// to the app as it would were the app dead. It gets no answer: this one
// only half-closes, and still reading, it was sent "HTTP/1.1 499", the
// status that is for the log alone.
func TestClientLeavingMidUploadIsTheClients(t *testing.T) {
	for _, protocol := range upstreamProtocols {
		t.Run(protocol, func(t *testing.T) {
			wait := func(r io.Reader) { io.Copy(io.Discard, r) } // until the proxy gives up
			conn, br, reg := uploadToFailingApp(t, protocol, func(w http.ResponseWriter, r *http.Request) {
				wait(r.Body)
			}, func(c net.Conn, req *http.Request) {
				wait(c)
			})
			conn.(*net.TCPConn).CloseWrite()
			if got, err := io.ReadAll(br); err != nil || len(got) != 0 {
				t.Errorf("half-closed client read %q, %v; want the connection closed with nothing on it", got, err)
			}
			// Counted before the connection was dropped.
			if got := failures(t, reg); got[proxy.FailureClientGone] != 1 || got[proxy.FailureUpstream] != 0 {
				t.Errorf("verifier_proxy_failures_total = %v; want the client gone", got)
			}
		})
	}
}
