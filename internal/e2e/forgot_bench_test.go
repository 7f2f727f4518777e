package e2e

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/palisade-auth/palisade/internal/mail/mailtest"
)

// BenchmarkForgotPasswordLatency times forgot-password for a registered
// and an unknown address, alternating, against the real binary, and
// reports both medians and their ratio (known/unknown; 1.00 means the time
// tells nothing). Each iteration times one request of each kind.
//
// Each timed request finds the issuer in the same state. Before it, the
// benchmark waits for the background work of the requests before (the
// known address's mail delivered and recorded, the unknown address's audit
// entry written): otherwise each kind would be timed against the other's
// leftovers. Since that wait leaves the issuer idle for a varying time and
// an idle process answers slower, one untimed request (always the unknown
// address) wakes it right before the timed one.
func BenchmarkForgotPasswordLatency(b *testing.B) {
	for _, be := range backends() {
		b.Run(be.name, func(b *testing.B) {
			dbURL := be.url(b)
			srv := mailtest.Start(b, mailtest.Options{})
			is := startIssuer(b, dbURL, smtpFlags(srv.Addr())...)
			st := openStore(b, dbURL)
			known, unknown := uniqueEmail(), uniqueEmail()
			register(b, is, known)
			waitRecorded(b, is, waitMail(b, srv, known, "http://issuer.test", "/verify-email"))

			sent, audited := 0, 0
			timed := func(isKnown bool) (response, time.Duration) {
				email := unknown
				if isKnown {
					email = known
				}
				forgot(b, is, unknown)
				audited++
				start := time.Now()
				r := forgot(b, is, email)
				took := time.Since(start)
				if isKnown {
					sent++
					ms := srv.WaitN(b, mailWait, sent, func(m mailtest.Message) bool {
						return mailtest.To(known)(m) && strings.Contains(m.Text, "/reset-password?token=")
					})
					waitRecorded(b, is, ms[sent-1])
				} else {
					audited++
				}
				waitAuditN(b, st, unknown, audited)
				return r, took
			}
			first, _ := timed(false)
			timed(true) // warm both paths
			if first.status != http.StatusAccepted {
				b.Fatalf("forgot = %d %q, want 202", first.status, first.body)
			}
			lat := map[bool][]time.Duration{}
			b.ResetTimer()
			for range b.N {
				for _, isKnown := range []bool{true, false} {
					r, took := timed(isKnown)
					lat[isKnown] = append(lat[isKnown], took)
					if r.status != first.status || !bytes.Equal(r.body, first.body) {
						b.Fatalf("forgot(known=%v) = %d %q, want %d %q for every address", isKnown, r.status, r.body, first.status, first.body)
					}
				}
			}
			mk, mu := median(lat[true]), median(lat[false])
			b.ReportMetric(float64(mk.Microseconds()), "µs-known-median")
			b.ReportMetric(float64(mu.Microseconds()), "µs-unknown-median")
			b.ReportMetric(float64(mk)/float64(mu), "known/unknown")
		})
	}
}
