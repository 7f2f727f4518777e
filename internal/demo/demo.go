// Package demo owns the browser demo served by `issuer serve --demo`: a
// static page that logs in with cookie delivery, asks "who am I" and logs
// out, so a newcomer (and the browser test) can watch the browser flow work
// end to end. Development only: it adds nothing the API does not offer.
package demo

import (
	"embed"
	"io/fs"
	"net/http"
)

//go:embed static
var files embed.FS

// Handler serves the demo under /demo/.
func Handler() http.Handler {
	sub, err := fs.Sub(files, "static")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	fileServer := http.StripPrefix("/demo/", http.FileServerFS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		// Scripts only from the page's own origin: nothing injected runs.
		h.Set("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'; form-action 'self'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Cache-Control", "no-cache")
		fileServer.ServeHTTP(w, r)
	})
}
