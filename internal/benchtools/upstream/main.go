// Command upstream is the app behind the proxies scripts/bench-proxy.sh
// measures: it answers every request with a small JSON body, so the
// proxies, not the app, are what differs between runs.
package main

import (
	"flag"
	"log"
	"net/http"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:18090", "address to listen on")
	flag.Parse()
	body := []byte(`{"ok":true}`)
	log.Fatal(http.ListenAndServe(*listen, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	})))
}
