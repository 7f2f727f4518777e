// Package apiversion owns the lifecycle signals of the API's path versions
// (/v1, ...): which versions are deprecated, when they stop working, and
// what replaces them, sent on every response of such a version as the
// Deprecation (RFC 9745), Sunset (RFC 8594) and Link rel="successor-version"
// headers.
package apiversion

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Deprecation describes one deprecated version.
type Deprecation struct {
	Version   string    // "v1"
	Since     time.Time // when it was deprecated
	Sunset    time.Time // when it stops working; zero when not decided
	Successor string    // URL of the replacement; "" when none
}

var versionRE = regexp.MustCompile(`^v[0-9]{1,3}$`)

// Parse reads VERSION:deprecated=DATE[,sunset=DATE][,successor=URL], dates
// as RFC 3339 or YYYY-MM-DD (UTC midnight), for example
// "v1:deprecated=2026-11-01,sunset=2027-06-30,successor=https://auth.example.com/v2/".
func Parse(s string) (Deprecation, error) {
	version, rest, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok || !versionRE.MatchString(version) {
		return Deprecation{}, fmt.Errorf("deprecation %q: want VERSION:deprecated=DATE[,sunset=DATE][,successor=URL] with VERSION like v1", s)
	}
	d := Deprecation{Version: version}
	for _, part := range strings.Split(rest, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return Deprecation{}, fmt.Errorf("deprecation %q: %q is not key=value", s, part)
		}
		var err error
		switch k {
		case "deprecated":
			d.Since, err = parseDate(v)
		case "sunset":
			d.Sunset, err = parseDate(v)
		case "successor":
			u, perr := url.Parse(v)
			if perr != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.ContainsAny(v, "<>\" ") {
				err = errors.New("successor must be an absolute http(s) URL")
			}
			d.Successor = v
		default:
			err = fmt.Errorf("unknown key %q (deprecated, sunset, successor)", k)
		}
		if err != nil {
			return Deprecation{}, fmt.Errorf("deprecation %q: %w", s, err)
		}
	}
	if d.Since.IsZero() {
		return Deprecation{}, fmt.Errorf("deprecation %q: deprecated=DATE is required", s)
	}
	if !d.Sunset.IsZero() && d.Sunset.Before(d.Since) {
		return Deprecation{}, fmt.Errorf("deprecation %q: sunset is before the deprecation", s)
	}
	return d, nil
}

func parseDate(v string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t.UTC(), nil
	}
	t, err := time.Parse(time.DateOnly, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is not an RFC 3339 time or YYYY-MM-DD date", v)
	}
	return t, nil
}

// Middleware adds the deprecation headers to every response under a
// deprecated version's path (/v1/...). A version past its sunset keeps
// answering: turning it off is a deliberate release, not a clock event.
func Middleware(deps []Deprecation, next http.Handler) http.Handler {
	if len(deps) == 0 {
		return next
	}
	headers := map[string]http.Header{}
	for _, d := range deps {
		h := http.Header{}
		h.Set("Deprecation", "@"+strconv.FormatInt(d.Since.Unix(), 10))
		if !d.Sunset.IsZero() {
			h.Set("Sunset", d.Sunset.UTC().Format(http.TimeFormat))
		}
		if d.Successor != "" {
			h.Set("Link", "<"+d.Successor+`>; rel="successor-version"`)
		}
		headers["/"+d.Version+"/"] = h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for prefix, h := range headers {
			if strings.HasPrefix(r.URL.Path, prefix) {
				for k, v := range h {
					w.Header()[k] = v
				}
				break
			}
		}
		next.ServeHTTP(w, r)
	})
}
