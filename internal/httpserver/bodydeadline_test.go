package httpserver

import (
	"bufio"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// serveTest runs a Server with opts on a loopback port until the test ends.
func serveTest(t *testing.T, opts Options, h http.Handler) string {
	t.Helper()
	_, addr := serveServer(t, opts, h)
	return addr
}

// serveServer is serveTest that returns the Server too.
func serveServer(t *testing.T, opts Options, h http.Handler) (*Server, string) {
	t.Helper()
	log, _ := newTestLogger()
	s := New("test", log, h, opts)
	if err := s.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return s, s.Addr().String()
}

// readAllHandler reads the body and reports how: 408 on ErrBodyTimeout,
// else 200 with the length and SHA-256 of what arrived. It sends the read
// error on errs.
func readAllHandler(errs chan<- error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		errs <- err
		if errors.Is(err, ErrBodyTimeout) {
			w.WriteHeader(http.StatusRequestTimeout)
			return
		}
		fmt.Fprintf(w, "%d %x", len(b), sha256.Sum256(b))
	})
}

func TestBodyDeadlinesEndATrickledBody(t *testing.T) {
	for _, tc := range []struct {
		name    string
		opts    Options
		every   time.Duration // keep sending a byte this often (0: stall), never idle for long
		headers string        // more request headers
	}{
		{"total bound, body trickles", Options{BodyTimeout: 300 * time.Millisecond}, 20 * time.Millisecond, ""},
		{"idle bound, body stalls", Options{BodyIdleTimeout: 300 * time.Millisecond}, 0, ""},
		{"idle bound, body stalls under an Upgrade header", Options{BodyIdleTimeout: 300 * time.Millisecond}, 0,
			"Connection: Upgrade\r\nUpgrade: h2c\r\n"},
		// A byte a second, each well within the idle timeout: only the
		// minimum rate can end it.
		{"minimum rate, body trickles a byte a second", Options{BodyIdleTimeout: 1500 * time.Millisecond, BodyMinRate: 1024}, time.Second, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := make(chan error, 1)
			addr := serveTest(t, tc.opts, readAllHandler(errs))
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			head := "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n" + tc.headers + "\r\nx"
			if _, err := io.WriteString(conn, head); err != nil {
				t.Fatal(err)
			}
			stop := make(chan struct{})
			defer close(stop)
			if tc.every > 0 {
				go func() {
					tick := time.NewTicker(tc.every)
					defer tick.Stop()
					for {
						select {
						case <-stop:
							return
						case <-tick.C:
							if _, err := conn.Write([]byte("x")); err != nil {
								return
							}
						}
					}
				}()
			}
			select {
			case err := <-errs:
				if !errors.Is(err, ErrBodyTimeout) {
					t.Fatalf("reading the body: err = %v, want %v", err, ErrBodyTimeout)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("the body read was not cut off within 30s")
			}
			conn.SetReadDeadline(time.Now().Add(30 * time.Second))
			res, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("reading the answer: %v", err)
			}
			res.Body.Close()
			if res.StatusCode != http.StatusRequestTimeout || !res.Close {
				t.Errorf("answer = %d (close %t), want %d and the connection closed", res.StatusCode, res.Close, http.StatusRequestTimeout)
			}
		})
	}
}

func TestBodyIdleTimeoutAllowsASteadyUpload(t *testing.T) {
	const idle = 2 * time.Second
	for _, tc := range []struct {
		name string
		opts Options
	}{
		{"idle bound", Options{BodyIdleTimeout: idle}},
		// The upload sends 128 KiB/s for more than twice the idle
		// window: eight times the minimum rate, so a loaded machine that
		// wakes the sender late does not make it look slow.
		{"idle bound and minimum rate", Options{BodyIdleTimeout: idle, BodyMinRate: 16 << 10}},
	} {
		t.Run(tc.name, func(t *testing.T) { testSteadyUpload(t, idle, tc.opts) })
	}
}

func testSteadyUpload(t *testing.T, idle time.Duration, opts Options) {
	errs := make(chan error, 1)
	addr := serveTest(t, opts, readAllHandler(errs))
	pr, pw := io.Pipe()
	sum := sha256.New()
	total := 0
	go func() {
		chunk := []byte(strings.Repeat("palisade", 4096))
		// Twenty chunks an eighth of the idle timeout apart: the upload
		// lasts more than twice the idle timeout, no gap comes near it.
		for i := 0; i < 20; i++ {
			if _, err := pw.Write(chunk); err != nil {
				return
			}
			sum.Write(chunk)
			total += len(chunk)
			time.Sleep(idle / 8)
		}
		pw.Close()
	}()
	res, err := http.Post("http://"+addr+"/", "application/octet-stream", pr)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	got, _ := io.ReadAll(res.Body)
	if err := <-errs; err != nil {
		t.Fatalf("reading the upload: %v", err)
	}
	if want := fmt.Sprintf("%d %x", total, sum.Sum(nil)); res.StatusCode != http.StatusOK || string(got) != want {
		t.Errorf("upload answered %d %q, want 200 %q", res.StatusCode, got, want)
	}
}

// TestBodyMinRateSparesASlowReader checks that the minimum rate charges
// the client only for the time the reads waited for it: a handler that
// reads a body, sent at once, slowly (as a reverse proxy does when its
// upstream takes its time) is not cut off, although the whole read lasts
// far longer than the idle window plus what the bytes paid for.
func TestBodyMinRateSparesASlowReader(t *testing.T) {
	const size = 32 << 10
	errs := make(chan error, 1)
	addr := serveTest(t, Options{BodyIdleTimeout: 300 * time.Millisecond, BodyMinRate: 1 << 20},
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			buf := make([]byte, 1<<10)
			n := 0
			for {
				m, err := io.ReadFull(r.Body, buf)
				n += m
				if err == io.EOF || err == io.ErrUnexpectedEOF {
					break
				}
				if err != nil {
					errs <- err
					w.WriteHeader(http.StatusRequestTimeout)
					return
				}
				time.Sleep(50 * time.Millisecond) // the slow upstream: 32 reads, 1.6 s
			}
			errs <- nil
			fmt.Fprint(w, n)
		}))
	res, err := http.Post("http://"+addr+"/", "application/octet-stream", strings.NewReader(strings.Repeat("x", size)))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	got, _ := io.ReadAll(res.Body)
	if err := <-errs; err != nil {
		t.Fatalf("reading the body slowly: %v, want no error", err)
	}
	if res.StatusCode != http.StatusOK || string(got) != fmt.Sprint(size) {
		t.Errorf("slow reader answered %d %q, want 200 %q", res.StatusCode, got, fmt.Sprint(size))
	}
}

// TestBodyDeadlineEndsWithTheBody checks that a handler which has read its
// body may run past the body timeout: its context is not cancelled, as it
// would be under http.Server's ReadTimeout.
func TestBodyDeadlineEndsWithTheBody(t *testing.T) {
	const total = 200 * time.Millisecond
	ctxErr := make(chan error, 1)
	addr := serveTest(t, Options{BodyTimeout: total}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			ctxErr <- err
			return
		}
		// Outlive the deadline the body was read under.
		time.Sleep(5 * total)
		ctxErr <- r.Context().Err()
	}))
	res, err := http.Post("http://"+addr+"/", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if err := <-ctxErr; err != nil {
		t.Errorf("request context after the body was read and the body timeout passed: %v, want nil", err)
	}
}

// TestBodyTimedOutBehindAReverseProxy checks that a proxy's error handler
// can tell a stalled client from a failing upstream, although the
// transport mostly reports the former as context.Canceled.
func TestBodyTimedOutBehindAReverseProxy(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.Copy(io.Discard, r.Body) }))
	defer up.Close()
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	type verdict struct {
		err      error
		timedOut bool
	}
	proxyTo := func(target string) (string, chan verdict) {
		u, err := url.Parse(target)
		if err != nil {
			t.Fatal(err)
		}
		verdicts := make(chan verdict, 1)
		rp := &httputil.ReverseProxy{
			Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(u) },
			ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
				verdicts <- verdict{err, BodyTimedOut(r.Context())}
				w.WriteHeader(http.StatusBadGateway)
			},
		}
		return serveTest(t, Options{BodyIdleTimeout: 200 * time.Millisecond}, rp), verdicts
	}

	addr, verdicts := proxyTo(up.URL)
	for i := 0; i < 5; i++ { // the transport's error varies from run to run
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(conn, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nx")
		select {
		case v := <-verdicts:
			if !v.timedOut {
				t.Errorf("stalled body: BodyTimedOut = false, want true (proxy error %v)", v.err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("stalled body: the proxy did not fail within 30s")
		}
		conn.Close()
	}

	addr, verdicts = proxyTo(dead.URL)
	res, err := http.Post("http://"+addr+"/", "text/plain", strings.NewReader("whole body"))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if v := <-verdicts; v.timedOut {
		t.Errorf("upstream down: BodyTimedOut = true, want false (proxy error %v)", v.err)
	}
}

// TestLiftBodyDeadlines: once a handler lifts the bounds, the rest of the
// body may come after a silence longer than the idle timeout, at any rate.
// The silence is measured by the server itself: it lasts until a second
// request, the same head and silence but no lift, started after the lift,
// has been cut off with 408.
func TestLiftBodyDeadlines(t *testing.T) {
	const idle = 200 * time.Millisecond
	lifted := make(chan struct{})
	errs := make(chan error, 2)
	addr := serveTest(t, Options{BodyIdleTimeout: idle, BodyMinRate: 1024}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		head := make([]byte, 5)
		if _, err := io.ReadFull(r.Body, head); err != nil {
			errs <- err
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if r.Header.Get("X-Lift") != "" {
			LiftBodyDeadlines(r.Context())
			close(lifted)
		}
		readAllHandler(errs).ServeHTTP(w, r)
	}))
	// post sends "head.", waits for quiet to return, sends the rest, and
	// returns the answer.
	post := func(lift bool, quiet func()) (int, string) {
		pr, pw := io.Pipe()
		defer pw.Close()
		go func() {
			pw.Write([]byte("head."))
			quiet()
			pw.Write([]byte("the rest"))
			pw.Close()
		}()
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/", pr)
		if lift {
			req.Header.Set("X-Lift", "1")
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return 0, ""
		}
		defer res.Body.Close()
		got, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(got)
	}
	cutOff := make(chan struct{})
	go func() {
		<-lifted
		if status, _ := post(false, func() { <-cutOff }); status != http.StatusRequestTimeout {
			t.Errorf("a body without the lift, quiet past the idle timeout = %d, want 408", status)
		}
		if err := <-errs; !errors.Is(err, ErrBodyTimeout) {
			t.Errorf("its read error = %v, want ErrBodyTimeout", err)
		}
		close(cutOff)
	}()
	status, got := post(true, func() { <-cutOff })
	<-cutOff // the other request's checks are done before the test is
	if err := <-errs; status != http.StatusOK || err != nil || !strings.HasPrefix(got, fmt.Sprint(len("the rest"))) {
		t.Errorf("after the lift and a silence that cut another body off: %d %q, read error %v; want 200 and the rest of the body", status, got, err)
	}
}

// A deadline set before LiftBodyDeadlines can fire before the lift clears
// it: HTTP/2 runs it as a timer that breaks the stream's body, and the
// next read, after the lift, fails with it. That read is still the
// client's timeout, never an error the handler would blame on itself (a
// proxy's 502, gRPC's 14 instead of 4).
func TestDeadlineThatFiredBeforeTheLiftIsATimeout(t *testing.T) {
	type verdict struct {
		err      error
		timedOut bool
	}
	got := make(chan verdict, 1)
	h := bodyDeadlines(0, time.Second, 0, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		head := make([]byte, len("head."))
		if _, err := io.ReadFull(r.Body, head); err != nil {
			got <- verdict{err: err}
			return
		}
		LiftBodyDeadlines(r.Context())
		_, err := r.Body.Read(make([]byte, 8))
		got <- verdict{err, BodyTimedOut(r.Context())}
	}))
	// What an HTTP/2 body gives once its read deadline's timer has fired.
	fired := fmt.Errorf("%w", os.ErrDeadlineExceeded)
	body := io.NopCloser(io.MultiReader(strings.NewReader("head."), iotest.ErrReader(fired)))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/", body))
	v := <-got
	if !errors.Is(v.err, ErrBodyTimeout) || !v.timedOut {
		t.Errorf("read after the lift = %v, BodyTimedOut %v; want ErrBodyTimeout and true", v.err, v.timedOut)
	}
}

// TestEndBody: a handler done with a body before its end ends it, and a
// read waiting in another goroutine for the client returns at once with
// ErrBodyEnded, not a timeout, with body deadlines or without.
func TestEndBody(t *testing.T) {
	for name, opts := range map[string]Options{"deadlines": {BodyIdleTimeout: time.Minute}, "none": {}} {
		t.Run(name, func(t *testing.T) {
			addr := serveTest(t, opts, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.NewResponseController(w).EnableFullDuplex()
				read := make(chan error, 1)
				go func() {
					_, err := io.ReadAll(r.Body)
					read <- err
				}()
				EndBody(w, r)
				err := <-read
				w.Header().Set("Connection", "close")
				fmt.Fprintf(w, "%v %v", err, BodyTimedOut(r.Context()))
			}))
			pr, pw := io.Pipe()
			defer pw.Close()
			go pw.Write([]byte("the start of a body that never ends"))
			req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/", pr)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			res, err := http.DefaultClient.Do(req.WithContext(ctx))
			if err != nil {
				t.Fatalf("a body the handler ended: %v; want its answer", err)
			}
			defer res.Body.Close()
			got, _ := io.ReadAll(res.Body)
			wantErr := ErrBodyEnded.Error()
			if name == "none" {
				wantErr = os.ErrDeadlineExceeded.Error()
			}
			if want := wantErr + " false"; !strings.HasSuffix(string(got), want) {
				t.Fatalf("the waiting read = %q; want %q", got, want)
			}
		})
	}
}
