// Package testnet holds the network pieces tests put between two real
// peers, or in place of one: a TCP relay that can slow one direction down
// or go silent, and a scripted server.
package testnet

import (
	"io"
	"net"
	"sync"
	"testing"
)

// Pass copies one direction of a relayed connection, from src to dst,
// until either fails; the relay then closes dst.
type Pass func(dst io.Writer, src io.Reader)

// Copy is the Pass that relays a stream as is.
func Copy(dst io.Writer, src io.Reader) { io.Copy(dst, src) }

// Relay listens on a loopback port and relays each connection it accepts
// to target: toTarget carries what the client sends, fromTarget what
// target answers (nil: Copy). It returns the relay's address; the relay,
// and every connection through it, closes when the test ends.
func Relay(t testing.TB, target string, toTarget, fromTarget Pass) string {
	t.Helper()
	if toTarget == nil {
		toTarget = Copy
	}
	if fromTarget == nil {
		fromTarget = Copy
	}
	return Serve(t, func(c net.Conn) {
		up, err := net.Dial("tcp", target)
		if err != nil {
			return
		}
		var wg sync.WaitGroup
		wg.Go(func() { toTarget(up, c); up.Close() })
		fromTarget(c, up)
		c.Close()
		wg.Wait()
	})
}

// Freezer makes relayed connections go silent at once, as a peer whose
// host vanished does: after Freeze its Pass forwards nothing more, either
// way, and closes nothing, so no FIN or RST tells either end.
type Freezer struct {
	frozen chan struct{}
	once   sync.Once
}

// NewFreezer returns a Freezer not yet frozen.
func NewFreezer() *Freezer { return &Freezer{frozen: make(chan struct{})} }

// Freeze silences every connection relayed with f.Pass.
func (f *Freezer) Freeze() { f.once.Do(func() { close(f.frozen) }) }

// Pass relays until frozen, then holds what it reads and never returns,
// so the relay leaves the connection open, until the test ends.
func (f *Freezer) Pass(dst io.Writer, src io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		select {
		case <-f.frozen:
			// Keep reading, so the sender's writes do not block on a
			// full window, and forward nothing: the relay closes the
			// connection at the end of the test, whose cleanup ends
			// the read.
			for err == nil {
				_, err = src.Read(buf)
			}
			return
		default:
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// Serve listens on a loopback port and hands each connection it accepts
// to serve, on a goroutine of its own, closing the connection when serve
// returns: a peer scripted byte by byte. It returns the listener's
// address. When the test ends the listener and every connection still
// open close, and Serve waits for serve to return.
func Serve(t testing.TB, serve func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() {
				defer c.Close()
				serve(c)
			})
		}
	})
	return ln.Addr().String()
}
