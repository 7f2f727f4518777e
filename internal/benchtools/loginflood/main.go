// Command loginflood measures the issuer's memory and login throughput under
// a flood of concurrent logins: it starts the real issuer binary, registers
// one user, has many clients log in as that user for a while, and reads the
// process's peak and current resident memory (VmHWM, VmRSS) from
// /proc/PID/status during the flood and after it, until the resident memory
// falls under a target. scripts/bench-issuer-memory.sh runs it; see there.
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/palisade-auth/palisade/internal/ratelimit"
)

const (
	mib      = 1 << 20
	email    = "flood@example.com"
	password = "correct horse battery staple"
)

type options struct {
	issuer, databaseURL string
	kekFile             string
	clients             int
	duration, settle    time.Duration
	maxPeak, maxAfter   float64 // MiB; 0: not checked
	hold                time.Duration
	extra, env          []string
}

func main() {
	var o options
	var extra, env string
	flag.StringVar(&o.issuer, "issuer", "bin/issuer", "issuer binary")
	flag.StringVar(&o.databaseURL, "database-url", "", "issuer database (default: a fresh SQLite file)")
	flag.StringVar(&o.kekFile, "kek-file", "", "the issuer's key-encryption key, created when missing: give the same one for every run on one -database-url (default: a fresh one)")
	flag.IntVar(&o.clients, "clients", 500, "concurrent clients logging in")
	flag.DurationVar(&o.duration, "duration", 20*time.Second, "how long the flood lasts")
	flag.DurationVar(&o.settle, "settle", 60*time.Second, "how long to wait after the flood for the resident memory to fall under -max-after")
	flag.Float64Var(&o.maxPeak, "max-peak", 0, "fail when the peak resident memory (VmHWM) exceeds this many MiB (0: report only)")
	flag.Float64Var(&o.maxAfter, "max-after", 48, "resident memory in MiB to wait for after the flood; fail when it is not reached within -settle (0: report only)")
	flag.DurationVar(&o.hold, "hold", 0, "keep the issuer running this long after the report, to look at its metrics")
	flag.StringVar(&extra, "issuer-flags", "", "extra flags for issuer serve, space separated")
	flag.StringVar(&env, "issuer-env", "", "extra environment of the issuer, space separated (e.g. GOMEMLIMIT=off)")
	flag.Parse()
	o.extra, o.env = strings.Fields(extra), strings.Fields(env)
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "loginflood:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	dir, err := os.MkdirTemp("", "loginflood")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if o.databaseURL == "" {
		o.databaseURL = "sqlite:" + filepath.Join(dir, "issuer.db")
	}
	is, err := startIssuer(o, dir)
	if err != nil {
		return err
	}
	defer is.stop()

	c := &http.Client{Transport: &http.Transport{MaxIdleConns: o.clients, MaxIdleConnsPerHost: o.clients}, Timeout: 5 * time.Minute}
	st, err := post(c, is.base+"/v1/register", `{"email":"`+email+`","password":"`+password+`"}`)
	if err != nil || (st != http.StatusCreated && st != http.StatusConflict) {
		return fmt.Errorf("register: status %d, %v", st, err)
	}
	if st, err := login(c, is.base); err != nil || st != http.StatusOK {
		return fmt.Errorf("first login: status %d, %v", st, err)
	}
	idle, err := readStatus(is.pid())
	if err != nil {
		return err
	}

	is.mu.Lock()
	fmt.Printf("issuer: pid %d, %s, admin %s; %d clients for %s\n", is.pid(), redact(o.databaseURL), is.admin, o.clients, o.duration)
	is.mu.Unlock()
	if lim := is.memoryLimit(); lim != "" {
		fmt.Printf("issuer memory limit: %s\n", lim)
	}
	fmt.Printf("resident before the flood: %.1f MiB\n", idle.rss)
	cpu0, err := cpuTime(is.pid())
	if err != nil {
		return err
	}
	res := flood(c, is.base, o.clients, o.duration)
	cpu1, err := cpuTime(is.pid())
	if err != nil {
		return err
	}
	c.CloseIdleConnections()
	end, err := readStatus(is.pid())
	if err != nil {
		return err
	}
	ok := res.ok.Load()
	fmt.Printf("logins: %d ok (%.1f/s), %d overloaded (503), %d other %v, %d errors\n",
		ok, float64(ok)/o.duration.Seconds(), res.busy.Load(), res.other.Load(), res.statuses, res.errs.Load())
	if ok > 0 {
		// On a shared machine logins/s follows what the neighbours leave
		// over; the issuer's own CPU time per login does not.
		fmt.Printf("issuer CPU per login: %.1f ms (%.1f s in all)\n", (cpu1-cpu0).Seconds()*1000/float64(ok), (cpu1 - cpu0).Seconds())
	}
	fmt.Printf("peak resident (VmHWM): %.1f MiB\n", end.hwm)
	fmt.Printf("resident at the end of the flood: %.1f MiB (anonymous %.1f MiB, the executable's and other files' pages %.1f MiB)\n", end.rss, end.anon, end.file)

	after, reached, err := settle(o, is.pid())
	if err != nil {
		return err
	}
	time.Sleep(o.hold)
	var failed []string
	if o.maxPeak > 0 && end.hwm > o.maxPeak {
		failed = append(failed, fmt.Sprintf("peak %.1f MiB over %.0f MiB", end.hwm, o.maxPeak))
	}
	if o.maxAfter > 0 && !reached {
		failed = append(failed, fmt.Sprintf("resident %.1f MiB still over %.0f MiB after %s", after.rss, o.maxAfter, o.settle))
	}
	if res.ok.Load() == 0 {
		failed = append(failed, "no login succeeded")
	}
	if len(failed) > 0 {
		return errors.New(strings.Join(failed, "; "))
	}
	return nil
}

// settle watches the issuer after the flood, with no requests at all: how
// long until its resident memory is back under o.maxAfter, within o.settle.
func settle(o options, pid int) (after status, reached bool, err error) {
	start := time.Now()
	for {
		if after, err = readStatus(pid); err != nil {
			return after, false, err
		}
		if o.maxAfter > 0 && after.rss <= o.maxAfter {
			reached = true
			break
		}
		if time.Since(start) >= o.settle {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	if reached {
		fmt.Printf("resident after the flood: %.1f MiB, under %.0f MiB %.1fs after the flood ended", after.rss, o.maxAfter, time.Since(start).Seconds())
	} else {
		fmt.Printf("resident after the flood: %.1f MiB after %s", after.rss, o.settle)
	}
	fmt.Printf(" (anonymous %.1f MiB, the executable's and other files' pages %.1f MiB)\n", after.anon, after.file)
	return after, reached, nil
}

type result struct {
	ok, busy, other, errs atomic.Int64

	mu       sync.Mutex
	statuses map[int]int // the other statuses
}

// flood has n clients log in back to back until d has passed. A client
// refused with 503 waits as long as Retry-After says, like a well-behaved
// client, so shedding is measured rather than a retry storm.
func flood(c *http.Client, base string, n int, d time.Duration) *result {
	res := result{statuses: map[int]int{}}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for ctx.Err() == nil {
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/login", strings.NewReader(loginBody))
				req.Header.Set("Content-Type", "application/json")
				resp, err := c.Do(req)
				if err != nil {
					if ctx.Err() == nil {
						res.errs.Add(1)
					}
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				switch resp.StatusCode {
				case http.StatusOK:
					res.ok.Add(1)
				case http.StatusServiceUnavailable:
					res.busy.Add(1)
					wait, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
					select {
					case <-ctx.Done():
					case <-time.After(time.Duration(max(wait, 1)) * time.Second):
					}
				default:
					res.other.Add(1)
					res.mu.Lock()
					res.statuses[resp.StatusCode]++
					res.mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return &res
}

var loginBody = `{"email":"` + email + `","password":"` + password + `"}`

func login(c *http.Client, base string) (int, error) { return post(c, base+"/v1/login", loginBody) }

func post(c *http.Client, url, body string) (int, error) {
	resp, err := c.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// status is the memory the kernel reports for a process, in MiB.
type status struct{ rss, hwm, anon, file float64 }

func readStatus(pid int) (status, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return status{}, err
	}
	var s status
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kib, _ := strconv.ParseFloat(f[1], 64)
		switch f[0] {
		case "VmRSS:":
			s.rss = kib / 1024
		case "VmHWM:":
			s.hwm = kib / 1024
		case "RssAnon:":
			s.anon = kib / 1024
		case "RssFile:":
			s.file = kib / 1024
		}
	}
	return s, nil
}

// cpuTime returns the user and system CPU time a process has used.
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name, field 2, is in parentheses and may hold spaces;
	// utime and stime are fields 14 and 15, in USER_HZ (100 on Linux).
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return time.Duration(u+s) * (time.Second / 100), nil
}

type issuer struct {
	cmd         *exec.Cmd
	base, admin string // admin: metrics, for looking closer during a run

	mu   sync.Mutex
	logs []map[string]any
	tail []string // the last lines, shown when the issuer does not start
	done chan struct{}
}

func (is *issuer) pid() int { return is.cmd.Process.Pid }

// memoryLimit returns what the issuer logged about its soft memory limit.
func (is *issuer) memoryLimit() string {
	is.mu.Lock()
	defer is.mu.Unlock()
	for _, m := range is.logs {
		if m["msg"] == "memory limit" {
			return fmt.Sprintf("%v MiB (%v)", m["mib"], m["source"])
		}
	}
	return ""
}

func (is *issuer) stop() {
	_ = is.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-is.done:
	case <-time.After(20 * time.Second):
		_ = is.cmd.Process.Kill()
		<-is.done
	}
}

// startIssuer runs issuer serve with every rate limit lifted, and waits for
// its API listener.
func startIssuer(o options, dir string) (*issuer, error) {
	kekFile := o.kekFile
	if kekFile == "" {
		kekFile = filepath.Join(dir, "kek")
	}
	if _, err := os.Stat(kekFile); errors.Is(err, os.ErrNotExist) {
		kek := make([]byte, 32)
		if _, err := rand.Read(kek); err != nil {
			return nil, err
		}
		if err := os.WriteFile(kekFile, []byte(base64.StdEncoding.EncodeToString(kek)), 0o600); err != nil {
			return nil, err
		}
	}
	args := []string{"serve", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0",
		"--database-url", o.databaseURL, "--kek-file", kekFile,
		"--issuer-url", "http://issuer.test", "--audience", "api", "--log-level", "info"}
	for _, name := range ratelimit.Names() {
		args = append(args, "--rate-limit", name+"=1000000/1m")
	}
	args = append(args, o.extra...)
	cmd := exec.Command(o.issuer, args...)
	cmd.Env = append(os.Environ(), o.env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	is := &issuer{cmd: cmd, done: make(chan struct{})}
	addr := make(chan string, 1)
	go func() {
		defer close(is.done)
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			is.mu.Lock()
			is.tail = append(is.tail[max(0, len(is.tail)-19):], sc.Text())
			is.mu.Unlock()
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) != nil {
				continue
			}
			// Keep only what is read later: one line per request would
			// grow this process's memory for nothing.
			switch m["msg"] {
			case "listening":
				switch m["server"] {
				case "api":
					addr <- m["addr"].(string)
				case "admin":
					is.mu.Lock()
					is.admin = "http://" + m["addr"].(string)
					is.mu.Unlock()
				}
			case "memory limit":
				is.mu.Lock()
				is.logs = append(is.logs, m)
				is.mu.Unlock()
			}
		}
		_ = cmd.Wait()
	}()
	select {
	case a := <-addr:
		is.base = "http://" + a
		return is, nil
	case <-is.done:
		return nil, fmt.Errorf("issuer exited before listening:\n%s", strings.Join(is.tail, "\n"))
	case <-time.After(60 * time.Second):
		is.stop()
		return nil, errors.New("issuer did not listen within 60s")
	}
}

// redact drops a password from a database URL before printing it.
func redact(u string) string {
	if i, j := strings.Index(u, "://"), strings.LastIndex(u, "@"); i >= 0 && j > i {
		if k := strings.Index(u[i+3:j], ":"); k >= 0 {
			return u[:i+3+k] + ":xxx" + u[j:]
		}
	}
	return u
}
