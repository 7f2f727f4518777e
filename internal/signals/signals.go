// Package signals owns a server process's answer to SIGINT and SIGTERM
// (and, once serving, SIGHUP and SIGPIPE): the first ends a context, which
// starts the graceful shutdown; the second ends the process at once,
// killed by that signal, after what was registered with BeforeKill
// (writing out the queued log lines) has had up to KillFlushTimeout.
package signals

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// KillFlushTimeout bounds the work done between a second signal and the
// process's end: an operator who sent it does not want to wait for it.
const KillFlushTimeout = time.Second

// Process is the signal handling of one process; make it with Notify.
type Process struct {
	ctx    context.Context
	cancel context.CancelFunc
	ch     chan os.Signal
	quit   chan struct{}
	once   sync.Once

	mu     sync.Mutex
	before []func(context.Context) error
}

// Notify starts handling SIGINT and SIGTERM. Call Stop when the process's
// work is done, so that later signals have their default action.
func Notify() *Process {
	ctx, cancel := context.WithCancel(context.Background())
	p := &Process{ctx: ctx, cancel: cancel, ch: make(chan os.Signal, 2), quit: make(chan struct{})}
	signal.Notify(p.ch, os.Interrupt, syscall.SIGTERM)
	go p.run()
	return p
}

// Serve readies the process for serving: SIGHUP starts the graceful
// shutdown as SIGINT and SIGTERM do (a closed terminal, a supervisor's
// stop; unless the process was started with it ignored, as nohup does), and a write to a stdout or stderr whose reader has gone fails
// with EPIPE instead of ending the process, as Go does unless SIGPIPE is
// ignored: a log shipper or a "| logger" that exits must cost log lines,
// which the log writer counts, not every request in flight. Commands that
// only print keep the default, so that "issuer audit list | head" ends
// quietly.
func (p *Process) Serve() {
	signal.Ignore(syscall.SIGPIPE)
	// Started under nohup (SIGHUP ignored), it stays ignored: Notify
	// would undo what the operator asked for.
	if !signal.Ignored(syscall.SIGHUP) {
		signal.Notify(p.ch, syscall.SIGHUP)
	}
}

// Context returns the context that ends at the first signal.
func (p *Process) Context() context.Context { return p.ctx }

// BeforeKill registers f to run, with a context ending after
// KillFlushTimeout, when a second signal ends the process. Functions run
// one after another in the order they were registered.
func (p *Process) BeforeKill(f func(context.Context) error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.before = append(p.before, f)
}

// Stop ends the handling: the context ends and later signals have their
// default action. Stop is idempotent.
func (p *Process) Stop() {
	p.once.Do(func() {
		signal.Stop(p.ch)
		close(p.quit)
		p.cancel()
	})
}

// Fail ends the process with status 1 after writing "name: err" to
// stderr, waiting for that write at most KillFlushTimeout: a stderr
// nobody reads (a stalled log reader that took stdout with it) must not
// keep a process whose work is over alive.
func (p *Process) Fail(name string, err error) {
	p.Stop()
	written := make(chan struct{})
	go func() {
		fmt.Fprintln(os.Stderr, name+":", err)
		close(written)
	}()
	select {
	case <-written:
	case <-time.After(KillFlushTimeout):
	}
	os.Exit(1)
}

func (p *Process) run() {
	select {
	case <-p.ch:
		p.cancel()
	case <-p.quit:
		return
	}
	select {
	case sig := <-p.ch:
		p.kill(sig)
	case <-p.quit:
	}
}

// kill runs the BeforeKill functions, then raises sig again with its
// default action, so the process ends as killed by it (what a supervisor
// or shell expects from a signal it sent).
func (p *Process) kill(sig os.Signal) {
	ctx, cancel := context.WithTimeout(context.Background(), KillFlushTimeout)
	p.mu.Lock()
	before := p.before
	p.mu.Unlock()
	for _, f := range before {
		_ = f(ctx) // the process ends either way; there is no one left to tell
	}
	cancel()
	signal.Reset(sig)
	if self, err := os.FindProcess(os.Getpid()); err == nil {
		_ = self.Signal(sig)
	}
	// Reached only when sig does not end the process (its disposition was
	// "ignore" when the process started): end it the way a shell reports
	// a process killed by sig.
	time.Sleep(KillFlushTimeout)
	if s, ok := sig.(syscall.Signal); ok {
		os.Exit(128 + int(s))
	}
	os.Exit(1)
}
