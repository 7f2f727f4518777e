package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/palisade-auth/palisade/internal/store"
)

// BenchmarkRevocationFeed drives GET /v1/revocations of the real issuer
// binary, as a fleet of verifiers polls it, over a feed of 1000 entries
// (one access-token lifetime of revocations on a busy system), and reports
// polls per second: ?after= polls when nothing changed (304 with
// If-None-Match), ?after= polls that find one new entry, and full lists.
func BenchmarkRevocationFeed(b *testing.B) {
	for _, be := range backends() {
		b.Run(be.name, func(b *testing.B) {
			dbURL := be.url(b)
			is := startIssuer(b, dbURL, "--log-level", "info")
			st := openStore(b, dbURL)
			ctx := context.Background()
			for i := range 1000 {
				if err := st.AppendRevocation(ctx, store.RevokedSession, fmt.Sprintf("session-%04d", i), time.Now()); err != nil {
					b.Fatal(err)
				}
			}
			c := &http.Client{Transport: &http.Transport{MaxIdleConns: 512, MaxIdleConnsPerHost: 512}}
			poll := func(b *testing.B, after, etag string, want int) {
				b.SetParallelism(32)
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						req, _ := http.NewRequest(http.MethodGet, is.base+"/v1/revocations"+after, nil)
						if etag != "" {
							req.Header.Set("If-None-Match", etag)
						}
						resp, err := c.Do(req)
						if err != nil {
							b.Error(err)
							return
						}
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode != want {
							b.Errorf("status %d, want %d", resp.StatusCode, want)
							return
						}
					}
				})
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "polls/s")
			}
			read := func(b *testing.B, after string) (cursor, etag string) {
				resp, err := c.Get(is.base + "/v1/revocations" + after)
				if err != nil {
					b.Fatal(err)
				}
				defer resp.Body.Close()
				var f struct{ Cursor string }
				if err := json.NewDecoder(resp.Body).Decode(&f); err != nil {
					b.Fatal(err)
				}
				return f.Cursor, resp.Header.Get("ETag")
			}

			cursor, _ := read(b, "")
			_, etag := read(b, "?after="+cursor) // nothing new: the same cursor, its ETag
			b.Run("AfterUnchanged", func(b *testing.B) { poll(b, "?after="+cursor, etag, http.StatusNotModified) })
			if err := st.AppendRevocation(ctx, store.RevokedSession, "session-new", time.Now()); err != nil {
				b.Fatal(err)
			}
			b.Run("AfterOneNew", func(b *testing.B) { poll(b, "?after="+cursor, etag, http.StatusOK) })
			b.Run("Full", func(b *testing.B) { poll(b, "", "", http.StatusOK) })
		})
	}
}
