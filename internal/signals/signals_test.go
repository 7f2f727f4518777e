package signals

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
)

// The test runs itself again as the child that gets the signals, since
// the second one ends the process it is sent to.
const childEnv = "SIGNALS_TEST_CHILD"

func TestSecondSignalFlushesThenKills(t *testing.T) {
	if os.Getenv(childEnv) == "1" {
		child()
		return
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
