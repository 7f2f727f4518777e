package proxy_test

import (
	"net/url"
	"path"
	"strings"
	"testing"

	"github.com/palisade-auth/palisade/internal/proxy"
)

// appReadings are ways an app or its server may read a request path before
// routing it: percent-decoded and cleaned (most routers), with each
// segment's ";param" cut off first (Tomcat, Jetty, Spring), with
// backslashes as slashes (IIS, some Windows file servers).
var appReadings = map[string]func(string) (string, bool){
	"decoded and cleaned": func(p string) (string, bool) {
		d, err := url.PathUnescape(p)
		return cleanKeepingSlash(d), err == nil
	},
	"path parameters cut": func(p string) (string, bool) {
		segs := strings.Split(p, "/")
		for i, s := range segs {
			segs[i], _, _ = strings.Cut(s, ";")
		}
		return cleanKeepingSlash(strings.Join(segs, "/")), true
	},
	"backslashes as slashes": func(p string) (string, bool) {
		return cleanKeepingSlash(strings.ReplaceAll(p, `\`, "/")), true
	},
}

// cleanKeepingSlash is path.Clean, but a trailing slash stays: "/public/"
// is a directory of the prefix, not the prefix's own page.
func cleanKeepingSlash(p string) string {
	c := path.Clean("/" + p)
	if strings.HasSuffix(p, "/") && c != "/" {
		c += "/"
	}
	return c
}

// FuzzPublicPathHoldsForTheApp: a path the verifier lets through without a
// token as public is public however the app reads it. "/public/..;/admin"
// was public to the verifier and "/admin" to Tomcat.
func FuzzPublicPathHoldsForTheApp(f *testing.F) {
	p := proxy.NewPublicPaths([]string{"/public/*", "/healthz"})
	for _, s := range []string{
		"/public/a.css", "/healthz", "/public/../admin", "/public/..;/admin", "/public/.;/a",
		"/public/%2e%2e/admin", `/public\..\admin`, "//public/a", "/public/a;b/c", "/healthz;x",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if !p.Match(raw) {
			return
		}
		for name, read := range appReadings {
			got, ok := read(raw)
			if ok && got != "/healthz" && !strings.HasPrefix(got, "/public/") {
				t.Errorf("Match(%q) = true, but an app that reads paths %s routes it to %q", raw, name, got)
			}
		}
	})
}
