// Package mailtest runs a real SMTP server (github.com/emersion/go-smtp) on
// a loopback port for tests: it captures the mails it accepts, can refuse or
// hold them, and parses each into its text and HTML parts, as a mail client
// would read them.
package mailtest

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net"
	netmail "net/mail"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// Options configure a Server.
type Options struct {
	// Addr is where to listen; default a free loopback port.
	Addr string
	// TLSConfig, when set, is offered with STARTTLS, or spoken from the
	// first byte when Implicit is set.
	TLSConfig *tls.Config
	Implicit  bool
	// Users, when set, turns on AUTH PLAIN (also without TLS) and refuses
	// mail from clients that did not log in as one of them.
	Users map[string]string
	// BeforeData, when set, runs when a client starts sending a mail's
	// content, before it is read: a test blocks in it to hold a delivery
	// in flight.
	BeforeData func()
}

// Message is a mail the server accepted.
type Message struct {
	From    string
	To      []string
	Raw     []byte
	Header  netmail.Header
	Subject string // decoded
	Text    string // the text/plain part, decoded
	HTML    string // the text/html part, decoded
	TLS     bool   // the mail arrived over TLS
	User    string // the AUTH user, "" without AUTH
}

// Server is a running SMTP server.
type Server struct {
	srv  *smtp.Server
	ln   net.Listener
	opts Options

	mu       sync.Mutex
	changed  chan struct{} // closed and replaced on every new mail
	msgs     []Message
	attempts int
	reject   *smtp.SMTPError
	done     chan struct{}
}

// Start starts a server; it stops when the test ends.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	s, err := start(opts)
	if err != nil {
		t.Fatalf("mailtest: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

func start(opts Options) (*Server, error) {
	addr := opts.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	if opts.Implicit {
		if opts.TLSConfig == nil {
			ln.Close()
			return nil, errors.New("implicit TLS needs a TLSConfig")
		}
		ln = tls.NewListener(ln, opts.TLSConfig)
	}
	s := &Server{ln: ln, opts: opts, changed: make(chan struct{}), done: make(chan struct{})}
	s.srv = smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) {
		return &session{s: s, conn: c}, nil
	}))
	s.srv.Domain = "mailtest.localhost"
	s.srv.AllowInsecureAuth = true
	// Clients that hang up early (tests of refusals) are expected.
	s.srv.ErrorLog = log.New(io.Discard, "", 0)
	s.srv.ReadTimeout, s.srv.WriteTimeout = time.Minute, time.Minute
	s.srv.MaxMessageBytes = 1 << 20
	if !opts.Implicit {
		s.srv.TLSConfig = opts.TLSConfig
	}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(ln)
	}()
	return s, nil
}

// Addr is the host:port the server listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops the server (idempotent).
func (s *Server) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		_ = s.srv.Close()
	}
	<-s.done
}

// Reject makes the server refuse every mail with e from now on; nil
// accepts again.
func (s *Server) Reject(e *smtp.SMTPError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reject = e
}

// Attempts is how many mails clients tried to hand over (accepted or not).
func (s *Server) Attempts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.attempts
}

// Messages returns the mails accepted so far.
func (s *Server) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Message(nil), s.msgs...)
}

// Wait returns the first accepted mail for which match is true, waiting up
// to timeout for it; it fails the test when none comes.
func (s *Server) Wait(t testing.TB, timeout time.Duration, match func(Message) bool) Message {
	t.Helper()
	return s.WaitN(t, timeout, 1, match)[0]
}

// WaitN waits up to timeout until n accepted mails match, and returns every
// match so far, oldest first; it fails the test when fewer come.
func (s *Server) WaitN(t testing.TB, timeout time.Duration, n int, match func(Message) bool) []Message {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		var got []Message
		for _, m := range s.msgs {
			if match(m) {
				got = append(got, m)
			}
		}
		changed := s.changed
		s.mu.Unlock()
		if len(got) >= n {
			return got
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("mailtest: %d matching mails within %s, want %d; got %d mails in all", len(got), timeout, n, len(s.Messages()))
		}
	}
}

// To matches a mail addressed to addr.
func To(addr string) func(Message) bool {
	return func(m Message) bool {
		for _, to := range m.To {
			if strings.EqualFold(to, addr) {
				return true
			}
		}
		return false
	}
}

// FreeAddr returns a loopback address nothing listens on (it was free a
// moment ago): for a server that a test starts later, after the program
// under test already tried to reach it.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

type session struct {
	s    *Server
	conn *smtp.Conn
	user string
	from string
	to   []string
}

func (se *session) AuthMechanisms() []string {
	if se.s.opts.Users == nil {
		return nil
	}
	return []string{sasl.Plain}
}

func (se *session) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, user, pass string) error {
		if want, ok := se.s.opts.Users[user]; !ok || want != pass {
			return smtp.ErrAuthFailed
		}
		se.user = user
		return nil
	}), nil
}

func (se *session) Mail(from string, _ *smtp.MailOptions) error {
	if se.s.opts.Users != nil && se.user == "" {
		return smtp.ErrAuthRequired
	}
	se.from = from
	return nil
}

func (se *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	se.to = append(se.to, to)
	return nil
}

func (se *session) Data(r io.Reader) error {
	if f := se.s.opts.BeforeData; f != nil {
		f()
	}
	raw, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	se.s.mu.Lock()
	defer se.s.mu.Unlock()
	se.s.attempts++
	if se.s.reject != nil {
		return se.s.reject
	}
	m, err := Parse(raw)
	if err != nil {
		return &smtp.SMTPError{Code: 554, EnhancedCode: smtp.EnhancedCode{5, 6, 0}, Message: "unparsable message: " + err.Error()}
	}
	_, m.TLS = se.conn.TLSConnectionState()
	m.From, m.To, m.User = se.from, append([]string(nil), se.to...), se.user
	se.s.msgs = append(se.s.msgs, m)
	close(se.s.changed)
	se.s.changed = make(chan struct{})
	return nil
}

func (se *session) Reset()        { se.from, se.to = "", nil }
func (se *session) Logout() error { return nil }

// Parse reads a raw mail into its headers, subject and text and HTML
// parts, decoding transfer encodings as a mail client does.
func Parse(raw []byte) (Message, error) {
	msg, err := netmail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		return Message{}, err
	}
	m := Message{Raw: raw, Header: msg.Header}
	dec := new(mime.WordDecoder)
	if m.Subject, err = dec.DecodeHeader(msg.Header.Get("Subject")); err != nil {
		return Message{}, fmt.Errorf("subject: %w", err)
	}
	if err := m.readPart(msg.Header, msg.Body); err != nil {
		return Message{}, err
	}
	return m, nil
}

func (m *Message) readPart(h map[string][]string, body io.Reader) error {
	get := func(k string) string {
		if v := h[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	ct := get("Content-Type")
	if ct == "" {
		ct = "text/plain"
	}
	mediaType, params, err := mime.ParseMediaType(ct)
	if err != nil {
		return fmt.Errorf("content type %q: %w", ct, err)
	}
	if strings.HasPrefix(mediaType, "multipart/") {
		mr := multipart.NewReader(body, params["boundary"])
		for {
			p, err := mr.NextPart()
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
			// NextPart already undoes quoted-printable and hides the header.
			if err := m.readPart(p.Header, p); err != nil {
				return err
			}
		}
	}
	switch strings.ToLower(get("Content-Transfer-Encoding")) {
	case "base64":
		body = base64.NewDecoder(base64.StdEncoding, newlineStripper{body})
	case "quoted-printable":
		body = quotedprintable.NewReader(body)
	}
	b, err := io.ReadAll(body)
	if err != nil {
		return err
	}
	switch mediaType {
	case "text/plain":
		m.Text += string(b)
	case "text/html":
		m.HTML += string(b)
	}
	return nil
}

// newlineStripper drops CR and LF, which base64 bodies wrap with.
type newlineStripper struct{ r io.Reader }

func (n newlineStripper) Read(p []byte) (int, error) {
	for {
		k, err := n.r.Read(p)
		j := 0
		for _, c := range p[:k] {
			if c != '\r' && c != '\n' {
				p[j] = c
				j++
			}
		}
		if j > 0 || err != nil {
			return j, err
		}
	}
}
