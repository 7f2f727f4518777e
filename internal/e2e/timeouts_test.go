package e2e

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/palisade-auth/palisade/internal/testdb"
)

// slowClient opens a raw connection to addr, sends head (request line,
// headers and the first bytes of a body) and then, if trickle is set, one
// more body byte every 100 ms until the connection fails or the test ends.
func slowClient(t *testing.T, addr, head string, trickle bool) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop); conn.Close() })
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	if trickle {
		go func() {
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
					if _, err := conn.Write([]byte(" ")); err != nil {
						return
					}
				}
			}
		}()
	}
	return conn
}

// cutOff waits, far longer than the server's configured timeout, for the
// server to end a slow request: it returns the answer the server sent
// before closing (nil if it closed without one) and fails the test unless
// the connection is closed in the end.
func cutOff(t *testing.T, conn net.Conn) *response {
	t.Helper()
	if err := conn.SetReadDeadline(time.Now().Add(30 * time.Second)); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	var got *response
	res, err := http.ReadResponse(br, nil)
	switch {
	case err == nil:
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		got = &response{status: res.StatusCode, header: res.Header, body: body}
	case errors.Is(err, os.ErrDeadlineExceeded):
		t.Fatal("the server neither answered nor closed the connection within 30s")
	}
	// Whatever was answered, the connection must not stay open for more.
	if _, err := br.ReadByte(); errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal("the server kept the connection open for 30s after the slow request")
	} else if err == nil {
		t.Fatal("the server sent more than one answer to one slow request")
	}
	return got
}

func TestIssuerCutsOffASlowBody(t *testing.T) {
	is := startIssuer(t, testdb.SQLite(t), "--read-body-timeout", "1s")
	head := "POST /v1/login HTTP/1.1\r\nHost: issuer.test\r\nContent-Type: application/json\r\nContent-Length: 2000\r\n\r\n{"
	// The body keeps coming, a byte every 100 ms: only a bound on the whole
	// body can end it before it completes, 200 s from now.
	got := cutOff(t, slowClient(t, is.addr["api"], head, true))
	if got == nil {
		t.Fatal("the issuer closed the connection without an answer, want 408 request_timeout")
	}
	var p map[string]any
	if err := json.Unmarshal(got.body, &p); err != nil || got.status != http.StatusRequestTimeout || p["code"] != "request_timeout" ||
		got.header.Get("Content-Type") != "application/problem+json" {
		t.Errorf("slow body answered %d %s %q, want 408 application/problem+json with code request_timeout", got.status, got.header.Get("Content-Type"), got.body)
	}

	// A body sent at once is unaffected.
	register(t, is, uniqueEmail())
}

// uploadApp is an upstream that answers with the length and SHA-256 of
// every body that reaches it.
func uploadApp(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := sha256.New()
		n, err := io.Copy(h, r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		fmt.Fprintf(w, "%d %x", n, h.Sum(nil))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// startUploadVerifier runs a verifier in front of uploadApp with a read
// idle timeout of idle (and more flags), and returns it and a token it
// accepts.
func startUploadVerifier(t *testing.T, idle string, flags ...string) (*verifierProc, string) {
	t.Helper()
	ks, jwks := keySetFile(t)
	v := startVerifier(t, append([]string{"--upstream", uploadApp(t).URL, "--jwks-file", jwks, "--read-idle-timeout", idle}, flags...)...)
	v.waitReady(t)
	return v, ks.Token(t, "user-1")
}

func TestVerifierCutsOffAStalledBody(t *testing.T) {
	v, tok := startUploadVerifier(t, "1s")
	head := "POST /upload HTTP/1.1\r\nHost: app.test\r\nAuthorization: Bearer " + tok +
		"\r\nContent-Type: application/octet-stream\r\nContent-Length: 2000\r\n\r\nx"
	// The client is still connected, so the verifier can and must answer
	// before it closes: 408, not the 502 of a failing app.
	got := cutOff(t, slowClient(t, v.addr["proxy"], head, false))
	wantRequestTimeout(t, "stalled body", got)
	if _, ok := v.logs.waitFor(time.Now().Add(10*time.Second), func(l string) bool {
		return strings.Contains(l, `"msg":"request body timed out"`)
	}); !ok {
		t.Errorf("verifier did not log the body timeout")
	}
	if strings.Contains(v.logs.String(), "upstream unavailable") {
		t.Errorf("verifier logged a stalled client as an upstream failure")
	}
}

// wantRequestTimeout fails unless got is the 408 problem+json answer with
// code request_timeout.
func wantRequestTimeout(t *testing.T, what string, got *response) {
	t.Helper()
	if got == nil {
		t.Fatalf("%s: the server closed the connection without an answer, want 408 request_timeout", what)
	}
	var p map[string]any
	if err := json.Unmarshal(got.body, &p); err != nil || got.status != http.StatusRequestTimeout || p["code"] != "request_timeout" ||
		got.header.Get("Content-Type") != "application/problem+json" {
		t.Errorf("%s answered %d %s %q, want 408 application/problem+json with code request_timeout", what, got.status, got.header.Get("Content-Type"), got.body)
	}
}

func TestVerifierCutsOffATrickledBody(t *testing.T) {
	v, tok := startUploadVerifier(t, "1s", "--read-min-rate", "1024")
	head := "POST /upload HTTP/1.1\r\nHost: app.test\r\nAuthorization: Bearer " + tok +
		"\r\nContent-Type: application/octet-stream\r\nContent-Length: 2000\r\n\r\nx"
	// A byte every 100 ms, ten times within the idle timeout: only the
	// minimum rate can end it before it completes, 200 s from now.
	got := cutOff(t, slowClient(t, v.addr["proxy"], head, true))
	wantRequestTimeout(t, "trickled body", got)
}

func TestVerifierPassesASteadyUpload(t *testing.T) {
	// Twenty chunks a quarter second apart: the upload lasts more than
	// twice the idle timeout; no gap between two chunks comes near it.
	const idle = 2 * time.Second
	// 128 KiB/s, over a hundred times the minimum rate.
	v, tok := startUploadVerifier(t, idle.String(), "--read-min-rate", "1024")
	pr, pw := io.Pipe()
	sum := sha256.New()
	var total int64
	go func() {
		chunk := bytes.Repeat([]byte("0123456789abcdef"), 2048)
		for i := 0; i < 20; i++ {
			chunk[0] = byte(i)
			if _, err := pw.Write(chunk); err != nil {
				return
			}
			sum.Write(chunk)
			total += int64(len(chunk))
			time.Sleep(idle / 8)
		}
		pw.Close()
	}()
	req, err := http.NewRequest("POST", v.base+"/upload", pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/octet-stream")
	r := send(t, req)
	if want := fmt.Sprintf("%d %x", total, sum.Sum(nil)); r.status != http.StatusOK || string(r.body) != want {
		t.Errorf("upload answered %d %q, want 200 %q (the app saw every byte)", r.status, r.body, want)
	}
}
