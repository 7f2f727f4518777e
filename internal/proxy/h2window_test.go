package proxy_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/palisade-auth/palisade/internal/proxy"
)

// TestH2CTransportWindows reads what the transport to an h2c app tells the
// app it may send ahead: each stream at most 256 KiB, which is what a
// client that stops reading can make the proxy hold for it (Go's default,
// 4 MiB a stream, let two stalled connections take a verifier to 2 GB);
// the connection far more, so that stalled streams never stop the others
// on it.
func TestH2CTransportWindows(t *testing.T) {
	for _, ping := range []time.Duration{0, time.Minute} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		type windows struct{ stream, conn uint32 }
		got := make(chan windows, 1)
		go func() {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(10 * time.Second))
			br := bufio.NewReader(conn)
			if _, err := io.ReadFull(br, make([]byte, len(http2.ClientPreface))); err != nil {
				return
			}
			var w windows
			fr := http2.NewFramer(conn, br)
			for {
				f, err := fr.ReadFrame()
				if err != nil {
					got <- w
					return
				}
				switch f := f.(type) {
				case *http2.SettingsFrame:
					if v, ok := f.Value(http2.SettingInitialWindowSize); ok {
						w.stream = v
					}
				case *http2.WindowUpdateFrame:
					if f.StreamID == 0 {
						w.conn = 65535 + f.Increment
					}
				case *http2.HeadersFrame: // the request: everything before it is the setup
					got <- w
					return
				}
			}
		}()
		tr := proxy.NewH2CTransport(ping)
		defer tr.CloseIdleConnections()
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+ln.Addr().String()+"/", nil)
		go func() {
			if resp, err := tr.RoundTrip(req); err == nil {
				resp.Body.Close()
			}
		}()
		w := <-got
		cancel()
		if w.stream != 256<<10 || w.conn < 64<<20 {
			t.Errorf("ping %v: the app may send %d bytes a stream and %d a connection ahead; want 256 KiB a stream and at least 64 MiB a connection", ping, w.stream, w.conn)
		}
	}
}
