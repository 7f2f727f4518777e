package verify

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lestrrat-go/jwx/v2/jwk"
)

// defaultPollInterval is how often a FileSource looks at its file.
const defaultPollInterval = 5 * time.Second

// FileOptions tune a FileSource. The zero value of each field means its
// default.
type FileOptions struct {
	// Interval is how often the file is checked for a change. Zero means
	// 5 seconds.
	Interval time.Duration
	// MaxSetBytes refuses a larger file. Zero means 1 MiB.
	MaxSetBytes int64
	// Now returns the current time, for LoadedAt; nil means time.Now.
	Now func() time.Time
	// Logger receives one line per load and per new error. Nil means no
	// logging.
	Logger *slog.Logger
	// OnReload, if set, is called with the outcome of every attempt to
	// load changed content, and with every new error reading the file: a
	// hook for metrics. It must not block.
	OnReload func(err error)
}

// FileSource is a KeySource over a JWK set in a file, reloaded when the
// file changes. It is safe for concurrent use.
//
// The path is looked up anew on every check, never watched, so the
// atomic symlink swap with which Kubernetes updates a mounted Secret or
// ConfigMap is seen like any other change. Until a set has loaded, Ready
// is false and every lookup fails with an error wrapping ErrNotReady; a
// file that disappears or stops parsing keeps the last good set.
type FileSource struct {
	path     string
	interval time.Duration
	maxBytes int64
	now      func() time.Time
	log      *slog.Logger
	onReload func(error)

	cur atomic.Pointer[keySet]

	mu       sync.Mutex  // serializes polls and guards the fields below
	seen     os.FileInfo // the file as last read
	readAt   time.Time   // wall clock time of that read
	sum      [sha256.Size]byte
	loadErr  error  // outcome of loading the content with hash sum
	reported string // the last error reported, to report each once
	dropped  droppedKids

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

var (
	_ KeySource   = (*FileSource)(nil)
	_ entrySource = (*FileSource)(nil)
)

// NewFileSource returns a FileSource over the JWK set at path. It reads the
// file once before returning, then checks it every Interval until Close.
// A file that cannot be read or parsed yet is not an error here: the source
// is simply not ready. Only an empty path or bad options are.
func NewFileSource(path string, opts FileOptions) (*FileSource, error) {
	s, err := newFileSource(path, opts)
	if err != nil {
		return nil, err
	}
	s.check()
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	s.wg.Go(func() { s.run(ctx) })
	return s, nil
}

// newFileSource builds the source without reading the file or starting the
// loop, which tests drive by hand.
func newFileSource(path string, opts FileOptions) (*FileSource, error) {
	var errs []error
	if path == "" {
		errs = append(errs, errors.New("verify: jwk set file path is empty"))
	}
	if opts.Interval < 0 {
		errs = append(errs, fmt.Errorf("verify: negative poll interval %v", opts.Interval))
	}
	if opts.MaxSetBytes < 0 {
		errs = append(errs, fmt.Errorf("verify: negative max set size %d", opts.MaxSetBytes))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	s := &FileSource{
		path:     path,
		interval: orDefault(opts.Interval, defaultPollInterval),
		maxBytes: orDefault(opts.MaxSetBytes, defaultMaxSetBytes),
		now:      opts.Now,
		log:      opts.Logger,
		onReload: opts.OnReload,
		cancel:   func() {},
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return s, nil
}

// Close stops checking the file and waits for the check under way. Keys
// already loaded are still served. Close always returns nil.
func (s *FileSource) Close() error {
	s.cancel()
	s.wg.Wait()
	return nil
}

// Ready reports whether a key set has been loaded. Once true it stays true.
func (s *FileSource) Ready() bool { return s.cur.Load() != nil }

// LoadedAt returns when the current key set was loaded, or the zero time
// before the first load; for a key-set age metric.
func (s *FileSource) LoadedAt() time.Time { return s.cur.Load().loadedAtOrZero() }

// Key returns the key with kid from the current set.
func (s *FileSource) Key(ctx context.Context, kid string) (jwk.Key, error) {
	e, err := s.entry(ctx, kid)
	if err != nil {
		return nil, err
	}
	return e.key, nil
}

func (s *FileSource) lookup(kid string) *keyEntry { return lookupIn(s.cur.Load(), kid) }

func (s *FileSource) entry(_ context.Context, kid string) (*keyEntry, error) {
	ks := s.cur.Load()
	if ks == nil {
		return nil, ErrNotReady
	}
	if e, err, found := ks.find(kid); found {
		return e, err
	}
	return nil, ErrUnknownKey
}

func (s *FileSource) run(ctx context.Context) {
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.check()
		}
	}
}

// check polls the file and reports what changed.
func (s *FileSource) check() {
	loaded, err := s.poll()
	s.mu.Lock()
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	report := loaded || msg != s.reported
	s.reported = msg
	s.mu.Unlock()
	if !report {
		return
	}
	if err != nil {
		s.log.Warn("jwk set file not loaded; keeping the last good set", "path", s.path, "err", err, "ready", s.Ready())
	} else {
		ks := s.cur.Load()
		s.log.Info("jwk set file loaded", "path", s.path, "keys", len(ks.keys), "unusable", len(ks.bad))
	}
	if s.onReload != nil {
		s.onReload(err)
	}
}

// racyWindow is how long after a file's mtime a read of it is not trusted
// to have seen its final content: file systems stamp times coarsely, so a
// same-size rewrite within it could keep mtime and size (the "racy git"
// problem). Until a read happens outside it, the content is hashed anew.
const racyWindow = 2 * time.Second

// poll reloads the file if its content changed. loaded reports an attempt
// to load new content, err its outcome or a failure to read the file;
// unchanged content answers with the outcome of its last load.
func (s *FileSource) poll() (loaded bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// Stat follows symlinks, so a swapped ..data link shows as another file.
	fi, err := os.Stat(s.path)
	if err != nil {
		return false, fmt.Errorf("jwk set file: %w", err)
	}
	if s.seen != nil && os.SameFile(s.seen, fi) && fi.Size() == s.seen.Size() &&
		fi.ModTime().Equal(s.seen.ModTime()) && s.readAt.Sub(fi.ModTime()) > racyWindow {
		return false, s.loadErr
	}
	b, err := readLimited(s.path, s.maxBytes)
	if err != nil {
		return false, fmt.Errorf("jwk set file: %w", err)
	}
	// The wall clock, not the injected one: it is compared with the file
	// system's timestamps.
	s.seen, s.readAt = fi, time.Now()
	sum := sha256.Sum256(b)
	if s.cur.Load() != nil || s.loadErr != nil {
		if sum == s.sum {
			return false, s.loadErr
		}
	}
	s.sum = sum
	old := s.cur.Load()
	ks, err := parseKeySet(b, old)
	if err != nil {
		s.loadErr = fmt.Errorf("jwk set file: %w", err)
		return true, s.loadErr
	}
	s.loadErr = nil
	ks.loadedAt = s.now()
	s.cur.Store(s.dropped.apply(ks))
	return true, nil
}

func readLimited(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s exceeds %d bytes", path, limit)
	}
	return b, nil
}
