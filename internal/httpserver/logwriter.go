package httpserver

import (
	"io"
	"sync"
	"time"
)

// LogFlushInterval is how long a line may wait in a LogWriter: short
// enough for an operator tailing the log, long enough that a busy server
// makes a handful of write system calls a second instead of one per
// request.
const LogFlushInterval = 100 * time.Millisecond

// logBufferSize bounds what a LogWriter holds between flushes; a burst
// that fills it is written out at once rather than waiting.
const logBufferSize = 64 << 10

// LogWriter buffers whole lines for w and writes them out every interval,
// when the buffer fills, and on Flush and Close. A LogWriter is safe for
// concurrent use: Write, Flush and Close may be called from any goroutine,
// and each Write reaches w whole, never interleaved with another.
//
// Lines written after Close go straight to w, so a goroutine that logs
// late in shutdown loses nothing.
type LogWriter struct {
	mu     sync.Mutex
	w      io.Writer
	buf    []byte
	closed bool

	stop chan struct{}
	done chan struct{}
}

var _ io.Writer = (*LogWriter)(nil)

// NewLogWriter returns a LogWriter for w, flushing every interval
// (LogFlushInterval when interval is not positive). Close it to flush the
// rest and stop its timer.
func NewLogWriter(w io.Writer, interval time.Duration) *LogWriter {
	if interval <= 0 {
		interval = LogFlushInterval
	}
	l := &LogWriter{
		w:    w,
		buf:  make([]byte, 0, logBufferSize),
		stop: make(chan struct{}),
		done: make(chan struct{}),
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
			_ = l.Flush()
		}
	}
}

// Write queues p, which should be one or more whole lines (a slog
// handler writes one record per call). It returns an error only when a
// flush it had to make failed; p is then dropped with what was queued.
func (l *LogWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return l.w.Write(p)
	}
	if len(l.buf)+len(p) > cap(l.buf) {
		if err := l.flushLocked(); err != nil {
			return 0, err
		}
		if len(p) > cap(l.buf) {
			return l.w.Write(p)
		}
	}
	l.buf = append(l.buf, p...)
	return len(p), nil
}

// Flush writes out every queued line.
func (l *LogWriter) Flush() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.flushLocked()
}

func (l *LogWriter) flushLocked() error {
	if len(l.buf) == 0 {
		return nil
	}
	_, err := l.w.Write(l.buf)
	// On failure the lines are dropped rather than retried: a sink that
	// cannot take them must not make the buffer, or the server, wait.
	l.buf = l.buf[:0]
	return err
}

// Close flushes the queued lines and stops the timer; later writes go to
// w unbuffered. Close is idempotent.
func (l *LogWriter) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	err := l.flushLocked()
	l.mu.Unlock()
	close(l.stop)
	<-l.done
	return err
}
