package httpserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// LogFlushInterval is how long a line may wait in a LogWriter: short
// enough for an operator tailing the log, long enough that a busy server
// makes a handful of write system calls a second instead of one per
// request.
const LogFlushInterval = 100 * time.Millisecond

// LogDrainTimeout is how long a server's shutdown waits for its log output
// to take the lines still queued. It ends the process well inside
// Kubernetes' default 30 s termination grace after a 20 s request grace,
// when the output is stuck (a full pipe nobody reads).
const LogDrainTimeout = 5 * time.Second

// logBufferSize is how much a LogWriter queues before it writes out early
// rather than at the next tick.
const logBufferSize = 64 << 10

// logQueueLimit bounds what a LogWriter holds while its output takes
// nothing (a full pipe, a stalled log shipper): lines past it are dropped
// and counted, so a stuck output costs log lines, never requests or the
// shutdown. 4 MiB is seconds of a busy server's lines.
const logQueueLimit = 4 << 20

// pipeAtomic is the most a write to a pipe puts in it whole (PIPE_BUF on
// Linux): a batch goes out in writes no larger, cut at line ends, so the
// lines of two processes sharing a pipe (a supervisor's, a container entry
// script's) never interleave mid-line, as 64 KiB writes did. A line longer
// than that goes in a write of its own.
const pipeAtomic = 4096

// ErrLogDropped is what Write returns for a line it dropped because the
// output has not taken what was queued before it.
var ErrLogDropped = errors.New("log line dropped: the log output is not keeping up")

// LogWriter queues whole lines for w and writes them out from a goroutine
// of its own: every interval, when a burst passes 64 KiB, and on Flush and
// Close. Write never waits for w, so a slow or stuck output cannot hold a
// request or the shutdown; when w takes nothing for long enough that 4 MiB
// is queued, further lines are dropped, counted (Dropped), and reported in
// a WARN line "log lines dropped" once w takes lines again.
//
// A LogWriter is safe for concurrent use: Write, Flush and Close may be
// called from any goroutine, and each Write reaches w whole, never
// interleaved with another. Lines written after a Close that emptied the
// queue go straight to w, so a goroutine that logs late in shutdown loses
// nothing; after a Close that gave up on a stuck w they are dropped.
type LogWriter struct {
	w io.Writer

	mu       sync.Mutex
	queue    []byte
	spare    []byte    // the last batch's buffer, reused for the next queue
	lost     int       // lines dropped since the last "log lines dropped" line
	failed   error     // the output's error, when it failed some of them
	next     *logBatch // finished when what is in queue now has been written
	inflight *logBatch // the batch being written, nil when none
	closed   bool
	stuck    bool // Close gave up waiting for w

	dropped atomic.Uint64
	partial atomic.Bool // a failed write left half a line in w
	kick    chan struct{}
	stop    chan struct{}
	done    chan struct{}
}

// logBatch is one write of queued lines; done closes once it was made.
type logBatch struct {
	done chan struct{}
	err  error
}

func newLogBatch() *logBatch { return &logBatch{done: make(chan struct{})} }

var _ io.Writer = (*LogWriter)(nil)

// NewLogWriter returns a LogWriter for w, flushing every interval
// (LogFlushInterval when interval is not positive). Close it to write out
// the rest and stop its goroutine.
func NewLogWriter(w io.Writer, interval time.Duration) *LogWriter {
	if interval <= 0 {
		interval = LogFlushInterval
	}
	l := &LogWriter{
		w:     w,
		queue: make([]byte, 0, logBufferSize),
		next:  newLogBatch(),
		kick:  make(chan struct{}, 1),
		stop:  make(chan struct{}),
		done:  make(chan struct{}),
	}
	go l.flushEvery(interval)
	return l
}

func (l *LogWriter) flushEvery(interval time.Duration) {
	defer close(l.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		case <-l.kick:
		}
		l.writeOut()
	}
}

// wake asks the flushing goroutine to write out now.
func (l *LogWriter) wake() {
	select {
	case l.kick <- struct{}{}:
	default: // a wake-up is already pending
	}
}

// Write queues p, which should be one or more whole lines (a slog handler
// writes one record per call). It never waits for the output; it returns
// ErrLogDropped when the queue is full and p was dropped.
func (l *LogWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	if l.closed {
		stuck := l.stuck
		l.mu.Unlock()
		if stuck {
			l.dropped.Add(uint64(lineCount(p)))
			return 0, ErrLogDropped
		}
		return l.emit(p)
	}
	if len(l.queue)+len(p) > logQueueLimit {
		n := lineCount(p)
		l.lost += n
		l.mu.Unlock()
		l.dropped.Add(uint64(n))
		return 0, ErrLogDropped
	}
	l.queue = append(l.queue, p...)
	early := len(l.queue) >= logBufferSize
	l.mu.Unlock()
	if early {
		l.wake()
	}
	return len(p), nil
}

// writeOut writes the queued lines, and the report of lines dropped before
// them, in one write made outside the lock that Write takes.
func (l *LogWriter) writeOut() {
	l.mu.Lock()
	if len(l.queue) == 0 && l.lost == 0 {
		l.mu.Unlock()
		return
	}
	out, b, reported, failed := l.queue, l.next, l.lost, l.failed
	if reported > 0 {
		out = appendDroppedLine(out, reported, failed)
	}
	l.queue, l.spare, l.lost, l.failed = l.spare[:0], nil, 0, nil
	l.next, l.inflight = newLogBatch(), b
	l.mu.Unlock()

	n, err := l.emit(out)

	l.mu.Lock()
	if err != nil {
		// The lines not wholly written are dropped rather than retried:
		// an output that failed them is not owed a second copy of what
		// it may have half taken. The report, the batch's last line, is
		// made again with the next one.
		unwritten := bytes.Count(out[n:], []byte{'\n'})
		if reported > 0 && n < len(out) {
			unwritten--
			l.lost += reported
		}
		l.dropped.Add(uint64(unwritten))
		l.lost += unwritten
		l.failed = err
	}
	l.inflight = nil
	if cap(out) <= 2*logBufferSize {
		l.spare = out // a burst's oversized buffer is left to the collector
	}
	l.mu.Unlock()
	b.err = err
	close(b.done)
}

// emit writes p, whole lines, to w in writes of at most pipeAtomic bytes
// cut at line ends, first ending the half line an earlier failed write
// left in w, so the next line does not continue it (a disk that filled
// mid-line, then had room again, held a line glued to the next). It
// returns how many bytes of p went out.
func (l *LogWriter) emit(p []byte) (int, error) {
	if l.partial.Load() {
		if _, err := l.w.Write([]byte{'\n'}); err != nil {
			return 0, err
		}
		l.partial.Store(false)
	}
	written := 0
	for written < len(p) {
		chunk := p[written:]
		if len(chunk) > pipeAtomic {
			if i := bytes.LastIndexByte(chunk[:pipeAtomic], '\n'); i >= 0 {
				chunk = chunk[:i+1]
			} else if i := bytes.IndexByte(chunk, '\n'); i >= 0 {
				chunk = chunk[:i+1]
			}
		}
		n, err := l.w.Write(chunk)
		written += n
		if err != nil {
			l.partial.Store(written > 0 && p[written-1] != '\n')
			return written, err
		}
	}
	return written, nil
}

// appendDroppedLine appends the WARN line that reports n dropped lines, in
// the format of NewLogger's lines: the output failed them (failed, its
// latest error: a full disk, a reader gone) or did not take them in time.
func appendDroppedLine(out []byte, n int, failed error) []byte {
	buf := bytes.NewBuffer(out)
	attrs := []any{slog.Int("lines", n), slog.String("reason", "the log output did not take them in time")}
	if failed != nil {
		attrs = []any{slog.Int("lines", n), slog.String("reason", "the log output failed them"), slog.String("err", failed.Error())}
	}
	NewLogger(buf, slog.LevelWarn).Warn("log lines dropped", attrs...)
	return buf.Bytes()
}

func lineCount(p []byte) int { return max(bytes.Count(p, []byte{'\n'}), 1) }

// Flush writes out every line queued before the call and returns the
// output's error, or ctx's when it ends first; the lines stay queued then.
func (l *LogWriter) Flush(ctx context.Context) error {
	l.mu.Lock()
	var b *logBatch
	switch {
	case len(l.queue) > 0 || l.lost > 0:
		b = l.next
	case l.inflight != nil:
		b = l.inflight
	}
	l.mu.Unlock()
	if b == nil {
		return nil
	}
	l.wake()
	select {
	case <-b.done:
		return b.err
	case <-ctx.Done():
		return fmt.Errorf("log output did not take the queued lines: %w", context.Cause(ctx))
	}
}

// Close writes out the queued lines and stops the flushing goroutine. When
// ctx ends first (the output is stuck) it returns an error, the queued
// lines are counted as dropped, and so are later writes. Close is
// idempotent.
func (l *LogWriter) Close(ctx context.Context) error {
	err := l.Flush(ctx)
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed, l.stuck = true, err != nil
	rest := l.queue
	l.queue = nil
	l.mu.Unlock()
	close(l.stop)
	if err != nil {
		if len(rest) > 0 {
			l.dropped.Add(uint64(lineCount(rest)))
		}
		return err // the goroutine is held by w; waiting for it would be waiting for w
	}
	<-l.done
	if len(rest) > 0 {
		// Lines queued while Flush waited: the goroutine has stopped, so
		// nothing else writes to w now.
		_, err = l.emit(rest)
	}
	return err
}

// CloseWithin is Close with a context that ends after d.
func (l *LogWriter) CloseWithin(d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return l.Close(ctx)
}

// Dropped returns how many lines were lost so far: dropped because the
// queue was full or the output stuck, or failed by the output.
func (l *LogWriter) Dropped() uint64 { return l.dropped.Load() }

// Collector returns <namespace>_log_lines_dropped_total, the Dropped count,
// for a metrics registry.
func (l *LogWriter) Collector(namespace string) prometheus.Collector {
	return prometheus.NewCounterFunc(prometheus.CounterOpts{
		Namespace: namespace,
		Name:      "log_lines_dropped_total",
		Help:      "Log lines lost because the log output did not take them in time or failed them.",
	}, func() float64 { return float64(l.Dropped()) })
}
