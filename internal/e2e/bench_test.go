package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/palisade-auth/palisade/internal/testdb"
)

// BenchmarkVerifierBinary drives the real verifier binary with many
// concurrent clients and reports its peak resident memory (VmHWM), the
// peak the README quotes. Target: at most 25 MiB.
func BenchmarkVerifierBinary(b *testing.B) {
	ks, jwks := keySetFile(b)
	ks.TTL = time.Hour
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

// BenchmarkLoginFlood sends waves of concurrent logins to the real
// issuer binary (default hashing pool and queue) and reports how many were
// admitted and shed, how long a shed answer took, and the issuer's peak
// resident memory: the load-shedding numbers the README quotes.
// Run beside a wave of 50, it shows that memory is bounded by the hashing
// pool, not by the number of clients.
func BenchmarkLoginFlood(b *testing.B) {
	for _, wave := range []int{50, 500} {
		b.Run(fmt.Sprintf("clients=%d", wave), func(b *testing.B) { loginFlood(b, wave) })
	}
}

func loginFlood(b *testing.B, wave int) {
	is := startIssuer(b, testdb.SQLite(b), "--log-level", "info")
	email := fmt.Sprintf("flood-%d@example.com", time.Now().UnixNano())
	body := fmt.Sprintf(`{"email":%q,"password":%q}`, email, strongPassword)
	c := &http.Client{Transport: &http.Transport{MaxIdleConns: wave, MaxIdleConnsPerHost: wave, MaxConnsPerHost: wave}}
	post := func(path, body string) (int, time.Duration) {
		start := time.Now()
		resp, err := c.Post(is.base+path, "application/json", strings.NewReader(body))
		if err != nil {
			b.Error(err)
			return 0, 0
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, time.Since(start)
	}
	if st, _ := post("/v1/register", body); st != http.StatusCreated {
		b.Fatalf("register: %d", st)
	}
	var (
		mu       sync.Mutex
		statuses = map[int]int{}
		shedTime time.Duration
	)
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := 0; i < wave; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				st, d := post("/v1/login", body)
				mu.Lock()
				defer mu.Unlock()
				statuses[st]++
				if st == http.StatusServiceUnavailable {
					shedTime += d
				}
			}()
		}
		close(start)
		wg.Wait()
	}
	b.StopTimer()
	total := float64(b.N * wave)
	b.ReportMetric(float64(statuses[http.StatusOK])/total*100, "%admitted")
	b.ReportMetric(float64(statuses[http.StatusServiceUnavailable])/total*100, "%shed")
	if shed := statuses[http.StatusServiceUnavailable]; shed > 0 {
		b.ReportMetric(float64(shedTime.Milliseconds())/float64(shed), "ms/shed-answer")
	}
	if other := int(total) - statuses[http.StatusOK] - statuses[http.StatusServiceUnavailable]; other > 0 {
		b.Errorf("answers other than 200 and 503: %v", statuses)
	}
	if kib, err := peakRSSKiB(is.cmd.Process.Pid); err == nil {
		b.ReportMetric(float64(kib)/1024, "peak-RSS-MiB")
	} else {
		b.Logf("peak RSS unavailable: %v", err)
	}
}
