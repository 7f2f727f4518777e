package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/palisade-auth/palisade/pkg/verify/verifytest"
)

// BenchmarkVerifierBinary drives the real verifier binary with many
// concurrent clients and reports its peak resident memory (VmHWM), the
// number the README quotes. Goal: under 30 MiB.
func BenchmarkVerifierBinary(b *testing.B) {
	ks := verifytest.NewKeySet(b)
	ks.Issuer, ks.Audience, ks.TTL = "http://issuer.test", "api", time.Hour
	jwks := filepath.Join(b.TempDir(), "jwks.json")
	if err := os.WriteFile(jwks, ks.JWKS(), 0o600); err != nil {
		b.Fatal(err)
	}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte(`{"ok":true}`)) }))
	defer up.Close()
	v := startVerifier(b, "--upstream", up.URL, "--jwks-file", jwks, "--log-level", "info")
	// Distinct users, so the token cache holds many entries.
	tokens := make([]string, 1000)
	for i := range tokens {
		tokens[i] = ks.Token(b, fmt.Sprint("user-", i))
	}
	c := &http.Client{Transport: &http.Transport{MaxIdleConns: 512, MaxIdleConnsPerHost: 512}}
	b.SetParallelism(32)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			req, _ := http.NewRequest(http.MethodGet, v.base+"/orders", nil)
			req.Header.Set("Authorization", "Bearer "+tokens[i%len(tokens)])
			i++
			resp, err := c.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Errorf("status %d", resp.StatusCode)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
	if kib, err := peakRSSKiB(v.cmd.Process.Pid); err == nil {
		b.ReportMetric(float64(kib)/1024, "peak-RSS-MiB")
	} else {
		b.Logf("peak RSS unavailable: %v", err)
	}
}

// peakRSSKiB reads VmHWM, the peak resident set size, from /proc.
func peakRSSKiB(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			return strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/%d/status", pid)
}
