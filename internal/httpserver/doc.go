// Package httpserver owns the HTTP plumbing shared by the issuer and the
// verifier: the server lifecycle with graceful shutdown, the request id, the
// access log, panic recovery, request metrics and the JSON logger. Each
// program composes the middleware in its own handler, in the order that
// makes each one see what it must: RequestID first so every log line has
// the id, AccessLog around Recover so a recovered panic is logged as the 500
// the client got.
package httpserver
