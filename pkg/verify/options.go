package verify

import (
	"fmt"
	"net/url"
	"time"
)

// What the polling sources (RemoteSource, RevocationSource) check of their
// options alike: an absolute http(s) URL, and no negative duration or size.

type namedDuration struct {
	name string
	d    time.Duration
}

type namedSize struct {
	name string
	n    int64
}

// sourceOptionErrors returns every problem with a source's URL (what names
// it in messages) and options, so a caller reports them all at once.
func sourceOptionErrors(what, rawURL string, durations []namedDuration, sizes []namedSize) []error {
	var errs []error
	if u, err := url.Parse(rawURL); err != nil {
		errs = append(errs, fmt.Errorf("verify: %s url: %w", what, err))
	} else if (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		errs = append(errs, fmt.Errorf("verify: %s url %q is not an absolute http(s) url", what, rawURL))
	}
	for _, o := range durations {
		if o.d < 0 {
			errs = append(errs, fmt.Errorf("verify: negative %s %v", o.name, o.d))
		}
	}
	for _, o := range sizes {
		if o.n < 0 {
			errs = append(errs, fmt.Errorf("verify: negative %s %d", o.name, o.n))
		}
	}
	return errs
}
