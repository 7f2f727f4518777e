package httpserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"
)

// ErrBodyTimeout is what a handler reading a request body gets when the
// client sends it too slowly: the whole body did not arrive within the
// body timeout, one read waited longer than the idle timeout for a byte,
// or the body came slower than the minimum rate. It wraps the network's timeout error; the request's connection is
// closed once the handler has answered.
var ErrBodyTimeout = errors.New("httpserver: request body read timed out")

// ErrBodyEnded is what a read of a request body gets after EndBody.
var ErrBodyEnded = errors.New("httpserver: request body ended by the handler")

// StatusClientClosedRequest is the status a request's access log line and
// metrics carry when its client went away before the answer (ClientGone):
// nobody reads it, it never goes on the wire, and nothing failed on this
// side. The number is nginx's.
const StatusClientClosedRequest = 499

// bodyDeadlines bounds the reading of request bodies, which net/http leaves
// unbounded without a ReadTimeout (and a ReadTimeout would also cancel a
// handler that runs past it): before each read of the body it sets the
// connection's read deadline to the earlier of the request's start plus
// total and now plus idle (shortened, with a minimum rate, to what the
// bytes received so far have paid for), and clears it once the body is
// read to its end. A zero duration or rate is no bound. Bodiless requests pass untouched, so a
// connection hijacked for an upgrade (a WebSocket handshake has no body)
// inherits no deadline; an Upgrade header is no way around the bound.
func bodyDeadlines(total, idle time.Duration, minRate int64, next http.Handler) http.Handler {
	if total <= 0 && idle <= 0 {
		return next
	}
	if idle <= 0 {
		minRate = 0 // the rate is paid against the idle window
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		b := &deadlineBody{ReadCloser: r.Body, ctl: http.NewResponseController(w), start: time.Now(), total: total, idle: idle, minRate: minRate}
		r = r.WithContext(context.WithValue(r.Context(), bodyKey{}, b))
		r.Body = b
		next.ServeHTTP(w, r)
		b.finish()
	})
}

type bodyKey struct{}

// BodyTimedOut reports whether the body of the request whose context is
// ctx was cut off by a body timeout. A handler that does not read the body
// itself needs it: a reverse proxy's transport, for one, reports the cut
// mostly as context.Canceled (net/http cancels the request's context when
// a read from the client fails), not as ErrBodyTimeout, so only this tells
// a slow client (408) from a failing upstream (502). It is set when the
// timed-out read returns; net/http's transport returns its error only after
// the goroutine that reads the body has.
func BodyTimedOut(ctx context.Context) bool {
	b, ok := ctx.Value(bodyKey{}).(*deadlineBody)
	if !ok {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.timedOut
}

// deadlineBody is a request body whose every read runs under a deadline.
type deadlineBody struct {
	io.ReadCloser
	ctl         *http.ResponseController
	start       time.Time
	total, idle time.Duration
	minRate     int64 // bytes per second; 0 is none

	mu       sync.Mutex
	received int64         // body bytes read so far
	waited   time.Duration // time spent inside reads of the body
	eof      bool          // the body was read to its end; the deadline is cleared
	ended    bool          // EndBody: every read fails at once
	lifted   bool          // LiftBodyDeadlines ended the bounds; the deadline is cleared
	timedOut bool          // a read hit the deadline
	finished bool          // the handler returned; the connection may serve the next request
}

// deadline is when a read starting at now must have returned.
func (b *deadlineBody) deadline(now time.Time) time.Time {
	var d time.Time
	if b.total > 0 {
		d = b.start.Add(b.total)
	}
	if b.idle > 0 {
		if i := now.Add(b.wait()); d.IsZero() || i.Before(d) {
			d = i
		}
	}
	return d
}

// wait is how long the next read may wait for a byte: the idle timeout,
// or less when a minimum rate is set and the body is behind it. As with
// Apache's mod_reqtimeout MinRate, the first idle window is free and each
// byte received buys 1/minRate s more; what is spent is the time the
// reads waited for the client, not the time since the start, so a handler
// that reads slowly (a reverse proxy whose upstream takes its time) is
// not blamed on the client, whose bytes wait in the socket meanwhile. A
// body behind the rate gets a deadline already past: its next read that
// needs the network fails at once.
func (b *deadlineBody) wait() time.Duration {
	if b.minRate <= 0 {
		return b.idle
	}
	budget := b.idle.Seconds() + float64(b.received)/float64(b.minRate) - b.waited.Seconds()
	if budget >= b.idle.Seconds() {
		return b.idle
	}
	return time.Duration(budget * float64(time.Second))
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	if b.ended {
		b.mu.Unlock()
		return 0, ErrBodyEnded
	}
	if b.finished || b.eof || b.lifted {
		b.mu.Unlock()
		n, err := b.ReadCloser.Read(p)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			// A deadline set before the lift fired before it cleared the
			// deadline (HTTP/2's is a timer that breaks the body): the
			// client was late all the same, which the handler must learn
			// (BodyTimedOut), not take for a failure of its own.
			b.mu.Lock()
			defer b.mu.Unlock()
			if b.ended {
				return n, ErrBodyEnded
			}
			return n, b.timeout(err)
		}
		return n, err
	}
	// A writer that cannot set deadlines (none of net/http's) leaves the
	// body unbounded, as it was.
	began := time.Now()
	_ = b.ctl.SetReadDeadline(b.deadline(began))
	b.mu.Unlock()

	n, err := b.ReadCloser.Read(p)

	b.mu.Lock()
	defer b.mu.Unlock()
	b.received += int64(n)
	b.waited += time.Since(began)
	switch {
	case b.ended && err != nil && err != io.EOF:
		err = ErrBodyEnded // the past deadline EndBody set, no timeout
	case err == io.EOF && !b.finished:
		b.eof = true
		_ = b.ctl.SetReadDeadline(time.Time{})
	case errors.Is(err, os.ErrDeadlineExceeded):
		err = b.timeout(err)
	}
	return n, err
}

// timeout records that a read hit the deadline and returns its error as
// ErrBodyTimeout. b.mu is held.
func (b *deadlineBody) timeout(err error) error {
	b.timedOut = true
	return fmt.Errorf("%w: %w", ErrBodyTimeout, err)
}

// LiftBodyDeadlines ends the bounds on the rest of the body of the request
// whose context is ctx: its later reads wait as long as the client takes.
// It is for a handler that knows the rest of the body is no upload but a
// stream the client may keep quiet for as long as the exchange lasts (a
// gRPC call's messages after its first), and must be called between reads,
// from the goroutine reading the body. A body left unread when the handler
// returns is still drained under the bounds. It does nothing to a request
// without them.
func LiftBodyDeadlines(ctx context.Context) {
	b, ok := ctx.Value(bodyKey{}).(*deadlineBody)
	if !ok {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.lifted || b.eof || b.finished {
		return
	}
	b.lifted = true
	_ = b.ctl.SetReadDeadline(time.Time{})
}

// EndBody ends the body of r, served by w, for a handler done with it
// before its end (a proxy whose app answered early), whose reader in
// another goroutine would otherwise wait on for the client: a read waiting
// for bytes returns at once with ErrBodyEnded (not a timeout), and so does
// every later one. An HTTP/1.1 connection then cannot serve another
// request, so the answer must close it (Connection: close). It must be
// called before the handler returns.
func EndBody(w http.ResponseWriter, r *http.Request) {
	past := time.Unix(1, 0)
	b, ok := r.Context().Value(bodyKey{}).(*deadlineBody)
	if !ok {
		// No deadline but ours is ever set on the connection.
		_ = http.NewResponseController(w).SetReadDeadline(past)
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.eof || b.ended {
		return
	}
	b.ended = true
	_ = b.ctl.SetReadDeadline(past)
}

// finish runs when the handler has returned. A body it left unread is
// drained by net/http before the connection serves another request; that
// drain gets the same bound as a read would.
func (b *deadlineBody) finish() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.finished = true
	if !b.eof && !b.ended {
		_ = b.ctl.SetReadDeadline(b.deadline(time.Now()))
	}
}
