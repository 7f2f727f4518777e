package e2e

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/palisade-auth/palisade/internal/memlimit"
	"github.com/palisade-auth/palisade/internal/testdb"
)

// memoryCgroup makes a memory cgroup limited to limit bytes, removed at
// the end of the test, and returns the wrapper that runs a binary in it
// (startWrapped). cgroup v1's memory hierarchy and a v2 hierarchy with the
// memory controller are both handled. Making one needs root and a
// writable cgroup filesystem: without them the test is skipped, loudly.
func memoryCgroup(t *testing.T, limit int64) []string {
	t.Helper()
	name := make([]byte, 6)
	if _, err := rand.Read(name); err != nil {
		t.Fatal(err)
	}
	var dir, limitFile string
	if ctl, err := os.ReadFile("/sys/fs/cgroup/cgroup.subtree_control"); err == nil && strings.Contains(string(ctl), "memory") {
		dir, limitFile = "/sys/fs/cgroup/palisade-test-"+hex.EncodeToString(name), "memory.max"
	} else if _, err := os.Stat("/sys/fs/cgroup/memory/memory.limit_in_bytes"); err == nil {
		dir, limitFile = "/sys/fs/cgroup/memory/palisade-test-"+hex.EncodeToString(name), "memory.limit_in_bytes"
	} else {
		t.Skip("SKIPPED: no cgroup memory controller here (neither v2 with memory enabled nor v1's memory hierarchy)")
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		if errors.Is(err, os.ErrPermission) || errors.Is(err, os.ErrExist) || strings.Contains(err.Error(), "read-only") {
			t.Skipf("SKIPPED: cannot make a memory cgroup (%v): run as root with a writable cgroup filesystem", err)
		}
		t.Fatal(err)
	}
	// Registered before the binary starts, so it runs after the binary's
	// own cleanup has ended it: a cgroup with a process in it cannot go.
	t.Cleanup(func() {
		if err := os.Remove(dir); err != nil {
			t.Errorf("remove cgroup: %v", err)
		}
	})
	if err := os.WriteFile(filepath.Join(dir, limitFile), []byte(strconv.FormatInt(limit, 10)), 0o644); err != nil {
		t.Fatal(err)
	}
	return []string{"/bin/sh", "-c", `echo $$ > "$0" && exec "$@"`, filepath.Join(dir, "cgroup.procs")}
}

// runtimeMemory reads the soft memory limit and GOGC a binary's runtime
// runs with, from its /metrics.
func runtimeMemory(t *testing.T, admin string) (limit int64, gogc int) {
	t.Helper()
	r := do(t, "GET", admin+"/metrics", nil)
	wantStatus(t, "GET /metrics", r, http.StatusOK)
	limit, gogc = -1, -1
	sc := bufio.NewScanner(strings.NewReader(string(r.body)))
	for sc.Scan() {
		name, v, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			continue
		}
		switch name {
		case "go_gc_gomemlimit_bytes":
			limit = memlimit.None // as a float, MaxInt64 rounds up past it
			if f < math.MaxInt64 {
				limit = int64(f)
			}
		case "go_gc_gogc_percent":
			gogc = int(f)
		}
	}
	if limit < 0 || gogc < 0 {
		t.Fatalf("/metrics has no go_gc_gomemlimit_bytes or go_gc_gogc_percent:\n%s", r.body)
	}
	return limit, gogc
}

// The soft memory limit each binary runs with: none of the verifier's own
// (a fixed one is reached by enough connections, and there the collector
// runs without pause; its GOGC is 200), the issuer's derived from its hashing pool, and in
// a container 90% of its memory limit when that is lower; GOMEMLIMIT
// always wins.
func TestMemoryLimits(t *testing.T) {
	if _, ok, err := memlimit.Container(); err != nil || ok {
		t.Skipf("SKIPPED: this test process runs under a container memory limit (%v), which every binary it starts inherits", err)
	}
	const mib = 1 << 20
	share := func(n int64) int64 { return int64(float64(n) * memlimit.ContainerShare) }
	_, jwks := keySetFile(t)
	verifier := func(t *testing.T, wrap, env []string) *verifierProc {
		v := startVerifierWrapped(t, wrap, env, "--upstream", "http://127.0.0.1:9", "--jwks-file", jwks)
		v.waitReady(t)
		return v
	}
	limitLine := func(t *testing.T, p *proc, want string) {
		t.Helper()
		if !strings.Contains(p.logs.String(), `"msg":"memory limit",`+want) {
			t.Errorf(`no "memory limit" line with %s in the log:%s`, want, p.logs.String())
		}
	}

	t.Run("verifier outside a container has none", func(t *testing.T) {
		v := verifier(t, nil, nil)
		if limit, gogc := runtimeMemory(t, v.admin); limit != memlimit.None || gogc != 200 {
			t.Errorf("memory limit %d, GOGC %d; want none (%d) and the verifier's 200", limit, gogc, int64(memlimit.None))
		}
		limitLine(t, v.proc, `"mib":"off"`)
	})
	t.Run("verifier in a 64 MiB container", func(t *testing.T) {
		v := verifier(t, memoryCgroup(t, 64*mib), nil)
		if limit, _ := runtimeMemory(t, v.admin); limit != share(64*mib) {
			t.Errorf("memory limit %d, want %d (90%% of 64 MiB)", limit, share(64*mib))
		}
		limitLine(t, v.proc, `"mib":57,"source":"container: 90% of its memory limit"`)
	})
	t.Run("GOMEMLIMIT wins over the container", func(t *testing.T) {
		v := verifier(t, memoryCgroup(t, 64*mib), []string{"GOMEMLIMIT=40MiB", "GOGC=150"})
		if limit, gogc := runtimeMemory(t, v.admin); limit != 40*mib || gogc != 150 {
			t.Errorf("memory limit %d, GOGC %d; want GOMEMLIMIT's %d and GOGC's 150", limit, gogc, 40*mib)
		}
		limitLine(t, v.proc, `"mib":40,"source":"GOMEMLIMIT"`)
	})

	derived := int64(2*19*mib + 31*mib) // --hash-concurrency 2, argon2's 19 MiB, the base
	t.Run("issuer in a container larger than its derived limit", func(t *testing.T) {
		is := startIssuerWrapped(t, memoryCgroup(t, 1024*mib), testdb.SQLite(t), kekFile(t), "--hash-concurrency", "2")
		if limit, _ := runtimeMemory(t, "http://"+is.addr["admin"]); limit != derived {
			t.Errorf("memory limit %d, want the derived %d", limit, derived)
		}
		limitLine(t, is.proc, `"mib":69,"source":"derived`)
	})
	t.Run("issuer in a container smaller than its derived limit", func(t *testing.T) {
		is := startIssuerWrapped(t, memoryCgroup(t, 64*mib), testdb.SQLite(t), kekFile(t), "--hash-concurrency", "2")
		if limit, _ := runtimeMemory(t, "http://"+is.addr["admin"]); limit != share(64*mib) {
			t.Errorf("memory limit %d, want %d (90%% of 64 MiB, below the derived %d)", limit, share(64*mib), derived)
		}
		limitLine(t, is.proc, `"mib":57,"source":"container: 90% of its memory limit, below the 69 MiB derived`)
	})
	t.Run("issuer's limit follows its connections", func(t *testing.T) {
		is := startIssuer(t, testdb.SQLite(t), "--hash-concurrency", "2")
		const held = 700 // 200 past the 500 the base allows for
		for range held {
			c, err := net.Dial("tcp", strings.TrimPrefix(is.base, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			// Answered, so surely accepted.
			fmt.Fprintf(c, "GET /.well-known/jwks.json HTTP/1.1\r\nHost: x\r\n\r\n")
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
		// The admin listener's connections count too: this test's scrapes
		// hold one or two.
		low, high := derived+200*48<<10, derived+205*48<<10
		deadline := time.Now().Add(10 * time.Second)
		for {
			limit, _ := runtimeMemory(t, "http://"+is.addr["admin"])
			if limit >= low && limit <= high {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("with %d connections held the limit is %d, want %d-%d (the derived %d + 48 KiB for each connection past 500)", held, limit, low, high, derived)
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
}
