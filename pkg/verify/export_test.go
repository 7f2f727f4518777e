package verify

import (
	"context"
	"time"
)

// Hooks for the external tests: sources whose loops the test drives with
// an injected clock, and views of internal state.

// NewManualRemoteSource is NewRemoteSource without the background loop.
func NewManualRemoteSource(ctx context.Context, url string, opts RemoteOptions) (*RemoteSource, error) {
	return newRemoteSource(ctx, url, opts)
}

// RefreshIfDue runs one turn of the background loop.
func (s *RemoteSource) RefreshIfDue(ctx context.Context) (bool, error) { return s.refreshIfDue(ctx) }

// NextRefresh returns when the background loop fetches next.
func (s *RemoteSource) NextRefresh() time.Time { return s.nextRefresh() }

// NewManualFileSource is NewFileSource without the first read and the loop.
func NewManualFileSource(path string, opts FileOptions) (*FileSource, error) {
	return newFileSource(path, opts)
}

// Poll runs one check of the file without reporting it.
func (s *FileSource) Poll() (loaded bool, err error) { return s.poll() }

// CacheLen returns the number of cached tokens.
func (v *Verifier) CacheLen() int { return v.cache.len() }

// NewManualRevocationSource is NewRevocationSource without the polling
// loop.
func NewManualRevocationSource(ctx context.Context, url string, opts RevocationOptions) (*RevocationSource, error) {
	return newRevocationSource(ctx, url, opts)
}
