package signals

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// The test runs itself again as the child that gets the signals, since
// the second one ends the process it is sent to.
const childEnv = "SIGNALS_TEST_CHILD"

func TestSecondSignalFlushesThenKills(t *testing.T) {
	if os.Getenv(childEnv) == "1" {
		child()
		return
	}
	if os.Getenv(childEnv) != "" {
		t.Skip("a child of another test")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSecondSignalFlushesThenKills$")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	out, err := cmd.Output()
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
		t.Fatalf("the child ended with %v (%v), want killed by SIGTERM; output %q", cmd.ProcessState, err, out)
	}
	if want := "shutting down\nflushed first\nflushed second\n"; string(out) != want {
		t.Fatalf("the child wrote %q, want %q", out, want)
	}
}

func child() {
	p := Notify()
	p.BeforeKill(func(context.Context) error { fmt.Println("flushed first"); return nil })
	p.BeforeKill(func(ctx context.Context) error {
		if _, ok := ctx.Deadline(); !ok {
			fmt.Println("no deadline")
		}
		fmt.Println("flushed second")
		return nil
	})
	self, _ := os.FindProcess(os.Getpid())
	_ = self.Signal(syscall.SIGTERM)
	<-p.Context().Done()
	fmt.Println("shutting down")
	_ = self.Signal(syscall.SIGTERM)
	select {} // the second signal ends the process
}

// After Stop the signals have their default action and the context is
// done, so a command that finished is not kept alive by a late signal.
func TestStopEndsTheContext(t *testing.T) {
	p := Notify()
	p.Stop()
	p.Stop()
	select {
	case <-p.Context().Done():
	default:
		t.Fatal("the context is not done after Stop")
	}
}

// Fail ends the process with status 1 even when stderr takes nothing (a
// full pipe nobody reads): it waits for its message a bounded time.
func TestFailEndsTheProcessWithStderrStuck(t *testing.T) {
	if os.Getenv(childEnv) == "fail" {
		Notify().Fail("child", errors.New("done"))
	}
	if os.Getenv(childEnv) != "" {
		t.Skip("a child of another test")
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// Fill the pipe: a write to a pipe with room never waits, so the
	// first to time out found it full (whole pages, then single bytes).
	for _, chunk := range [][]byte{make([]byte, 4096), {0}} {
		for {
			w.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
			if _, err := w.Write(chunk); err != nil {
				break
			}
		}
	}
	w.SetWriteDeadline(time.Time{})
	cmd := exec.Command(os.Args[0], "-test.run=^TestFailEndsTheProcessWithStderrStuck$")
	cmd.Env = append(os.Environ(), childEnv+"=fail")
	cmd.Stderr = w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("the child did not end within 30s of Fail with its stderr stuck (Fail waits 1s for it)")
	}
	if code := cmd.ProcessState.ExitCode(); code != 1 {
		t.Fatalf("the child exited %d, want 1", code)
	}
}

// Once serving, a stdout whose reader has gone fails the write with EPIPE
// and the process goes on (it used to die of SIGPIPE at the next log
// flush, every request in flight with it), and SIGHUP starts the graceful
// shutdown.
func TestServeOutlivesItsStdoutReader(t *testing.T) {
	if os.Getenv(childEnv) == "serve" {
		p := Notify()
		p.Serve()
		_, err := os.Stdout.Write([]byte("a line nobody reads\n"))
		fmt.Fprintln(os.Stderr, "write:", errors.Is(err, syscall.EPIPE))
		self, _ := os.FindProcess(os.Getpid())
		_ = self.Signal(syscall.SIGHUP)
		<-p.Context().Done()
		fmt.Fprintln(os.Stderr, "shutting down")
		os.Exit(0)
	}
	if os.Getenv(childEnv) != "" {
		t.Skip("a child of another test")
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close() // the reader is gone before the child writes
	cmd := exec.Command(os.Args[0], "-test.run=^TestServeOutlivesItsStdoutReader$")
	cmd.Env = append(os.Environ(), childEnv+"=serve")
	cmd.Stdout = w
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	w.Close()
	if err != nil || stderr.String() != "write: true\nshutting down\n" {
		t.Fatalf("the child ended with %v and wrote %q to stderr, want status 0 and an EPIPE, then a graceful shutdown on SIGHUP", err, stderr.String())
	}
}
