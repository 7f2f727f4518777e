package proxy

import (
	"net/http"
	"strings"
)

// upgrade is the protocol switch a request asks for.
type upgrade int

const (
	upgradeNone      upgrade = iota
	upgradeWebSocket         // Upgrade: websocket, and nothing else
	upgradeOther             // h2c (or an HTTP2-Settings header), or any other protocol
)

// upgradeOf classifies the request's Upgrade and HTTP2-Settings headers.
// Only a WebSocket upgrade is ever tunnelled: once a connection is
// switched, the verifier no longer sees the requests on it, so an h2c
// upgrade granted on a public path would carry unchecked requests to the
// app.
func upgradeOf(h http.Header) upgrade {
	vals := h.Values("Upgrade")
	if len(h.Values("Http2-Settings")) > 0 {
		return upgradeOther
	}
	if len(vals) == 0 {
		return upgradeNone
	}
	if len(vals) == 1 && strings.EqualFold(strings.TrimSpace(vals[0]), "websocket") {
		return upgradeWebSocket
	}
	return upgradeOther
}

// dropUpgrade removes a refused upgrade from a request, which is then
// answered as though it had asked for none (as RFC 9110 section 7.8 lets
// a server do): no tunnel is opened.
func dropUpgrade(h http.Header) {
	h.Del("Upgrade")
	h.Del("Http2-Settings")
}
