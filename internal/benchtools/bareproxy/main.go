// Command bareproxy is the baseline scripts/bench-proxy.sh measures the
// verifier against: an httputil.ReverseProxy with http.DefaultTransport's
// settings but for a large idle pool, and nothing else (no buffer pool, no
// log, no metrics).
package main

import (
	"flag"
	"log"
	"net/http"
	"net/http/httputil"
	"net/url"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:18080", "address to listen on")
	upstream := flag.String("upstream", "http://127.0.0.1:18090", "URL to proxy to")
	flag.Parse()
	u, err := url.Parse(*upstream)
	if err != nil {
		log.Fatal(err)
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns, t.MaxIdleConnsPerHost = 1024, 1024
	rp := &httputil.ReverseProxy{
		Rewrite:   func(pr *httputil.ProxyRequest) { pr.SetURL(u); pr.SetXForwarded() },
		Transport: t,
	}
	log.Fatal(http.ListenAndServe(*listen, rp))
}
