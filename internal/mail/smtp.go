package mail

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	netmail "net/mail"
	"net/url"
	"strconv"
	"strings"
	"time"

	gomail "github.com/wneessen/go-mail"
	gosmtp "github.com/wneessen/go-mail/smtp"
)

// SMTPOptions tune an SMTP sender; the zero value is right for production.
type SMTPOptions struct {
	// Timeout bounds one whole delivery: connecting, TLS, authentication
	// and the transfer. Default DefaultSMTPTimeout.
	Timeout time.Duration
	// TLSConfig, when set, is cloned for the server's certificate checks
	// (for example RootCAs for a private CA). ServerName is always the
	// host of the URL.
	TLSConfig *tls.Config
	// Dial replaces the TCP dialer; nil dials directly. Tests use it to
	// reach a named, non-loopback host on a loopback listener. TLS (implicit
	// or STARTTLS) is layered on top of what it returns, as usual.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// DefaultSMTPTimeout is the time allowed for one delivery by default.
const DefaultSMTPTimeout = 30 * time.Second

// SMTP sends mail through one SMTP server with github.com/wneessen/go-mail.
//
// smtp://host:port uses STARTTLS, and requires it (the mandatory TLS policy:
// no mail and no password ever travels in clear text) unless the host is
// loopback, where a local relay or a development catcher usually offers no
// TLS; there STARTTLS is used when offered. smtps://host:port speaks TLS from
// the first byte. User info in the URL turns on SMTP AUTH.
type SMTP struct {
	host, addr string
	implicit   bool
	policy     gomail.TLSPolicy
	user, pass string
	auth       bool
	from       *netmail.Address
	opts       SMTPOptions
	tlsConfig  *tls.Config
}

var _ Sender = (*SMTP)(nil)

// NewSMTP returns a sender for rawURL (smtp:// or smtps://, optional
// user:password@, port defaulting to 587 and 465) with the From address
// from.
func NewSMTP(rawURL, from string, opts SMTPOptions) (*SMTP, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		// url.Parse errors quote the URL, password included.
		return nil, errors.New("mail: the SMTP URL does not parse")
	}
	s := &SMTP{host: u.Hostname(), opts: opts}
	port := u.Port()
	switch u.Scheme {
	case "smtp":
		if port == "" {
			port = "587"
		}
	case "smtps":
		s.implicit = true
		if port == "" {
			port = "465"
		}
	default:
		return nil, fmt.Errorf("mail: SMTP URL scheme must be smtp or smtps, got %q", u.Scheme)
	}
	if s.host == "" {
		return nil, errors.New("mail: the SMTP URL has no host")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return nil, fmt.Errorf("mail: invalid SMTP port %q", port)
	}
	s.addr = net.JoinHostPort(s.host, port)
	s.policy = gomail.TLSMandatory
	if IsLoopback(s.host) {
		s.policy = gomail.TLSOpportunistic
	}
	if u.User != nil {
		s.auth = true
		s.user = u.User.Username()
		s.pass, _ = u.User.Password()
	}
	if s.from, err = netmail.ParseAddress(from); err != nil {
		return nil, fmt.Errorf("mail: invalid From address %q: %w", from, err)
	}
	if s.opts.Timeout <= 0 {
		s.opts.Timeout = DefaultSMTPTimeout
	}
	if opts.TLSConfig != nil {
		s.tlsConfig = opts.TLSConfig.Clone()
	} else {
		s.tlsConfig = &tls.Config{}
	}
	s.tlsConfig.ServerName = s.host
	if s.tlsConfig.MinVersion < tls.VersionTLS12 {
		s.tlsConfig.MinVersion = tls.VersionTLS12
	}
	return s, nil
}

// IsLoopback reports whether host names this machine: "localhost" or a
// loopback IP. Only such a host may be spoken to without TLS.
func IsLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Host is the SMTP server's host name.
func (s *SMTP) Host() string { return s.host }

// TLSRequired reports whether the sender refuses to deliver without TLS.
func (s *SMTP) TLSRequired() bool { return s.implicit || s.policy == gomail.TLSMandatory }

// Send delivers m, or returns why not. It never takes longer than the
// configured timeout, whatever the server does.
func (s *SMTP) Send(ctx context.Context, m Message) error {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	msg, err := s.message(m)
	if err != nil {
		return err
	}
	opts := []gomail.Option{
		gomail.WithPort(mustPort(s.addr)),
		gomail.WithTimeout(s.opts.Timeout),
		gomail.WithTLSConfig(s.tlsConfig),
		gomail.WithDialContextFunc(s.dialer(ctx)),
	}
	if s.implicit {
		// Our dialer already speaks TLS; this tells go-mail not to try
		// STARTTLS on top.
		opts = append(opts, gomail.WithSSL())
	} else {
		opts = append(opts, gomail.WithTLSPolicy(s.policy))
	}
	if s.auth {
		opts = append(opts, gomail.WithSMTPAuthCustom(&plainOrLogin{user: s.user, pass: s.pass, host: s.host}))
	}
	c, err := gomail.NewClient(s.host, opts...)
	if err != nil {
		return fmt.Errorf("mail: smtp client: %w", err)
	}
	if err := c.DialAndSendWithContext(ctx, msg); err != nil {
		return fmt.Errorf("mail: smtp %s: %w", s.addr, err)
	}
	return nil
}

// dialer connects for one delivery. The connection is closed when ctx ends,
// which bounds the whole exchange: go-mail's own deadlines cover the dial
// and each command, not a server that greets slowly or trickles replies.
func (s *SMTP) dialer(ctx context.Context) gomail.DialContextFunc {
	// go-mail passes host:port unbracketed, wrong for an IPv6 literal;
	// s.addr is the same address, joined properly.
	return func(dctx context.Context, network, _ string) (net.Conn, error) {
		dial := s.opts.Dial
		if dial == nil {
			dial = (&net.Dialer{}).DialContext
		}
		conn, err := dial(dctx, network, s.addr)
		if err != nil {
			return nil, err
		}
		context.AfterFunc(ctx, func() { conn.Close() })
		if deadline, ok := ctx.Deadline(); ok {
			_ = conn.SetDeadline(deadline)
		}
		if !s.implicit {
			return conn, nil
		}
		tc := tls.Client(conn, s.tlsConfig)
		if err := tc.HandshakeContext(dctx); err != nil {
			conn.Close()
			return nil, err
		}
		return tc, nil
	}
}

func mustPort(addr string) int {
	_, p, _ := net.SplitHostPort(addr)
	n, _ := strconv.Atoi(p)
	return n
}

// message builds the MIME mail: multipart/alternative with the text part
// first and the HTML part preferred, quoted-printable, UTF-8.
func (s *SMTP) message(m Message) (*gomail.Msg, error) {
	msg := gomail.NewMsg(gomail.WithNoDefaultUserAgent())
	msg.FromMailAddress(s.from)
	if err := msg.AddToFormat(m.ToName, m.To); err != nil {
		return nil, fmt.Errorf("mail: recipient: %w", err)
	}
	msg.Subject(m.Subject)
	if !m.Date.IsZero() {
		msg.SetDateWithValue(m.Date)
	}
	if m.ID != "" {
		domain := s.from.Address[strings.LastIndexByte(s.from.Address, '@')+1:]
		msg.SetMessageIDWithValue(m.ID + "@" + domain)
	}
	msg.SetBodyString(gomail.TypeTextPlain, m.Text)
	if m.HTML != "" {
		msg.AddAlternativeString(gomail.TypeTextHTML, m.HTML)
	}
	return msg, nil
}

// plainOrLogin authenticates with PLAIN when the server offers it and LOGIN
// otherwise: between them they cover the submission services in use. Both
// refuse to send the password over a connection that is neither TLS nor to
// localhost (go-mail's checks, from net/smtp).
type plainOrLogin struct {
	user, pass, host string
	chosen           gosmtp.Auth
}

func (a *plainOrLogin) Start(server *gosmtp.ServerInfo) (string, []byte, error) {
	a.chosen = gosmtp.PlainAuth("", a.user, a.pass, a.host, false)
	for _, m := range server.Auth {
		if strings.EqualFold(m, "PLAIN") {
			return a.chosen.Start(server)
		}
	}
	for _, m := range server.Auth {
		if strings.EqualFold(m, "LOGIN") {
			a.chosen = gosmtp.LoginAuth(a.user, a.pass, a.host, false)
			return a.chosen.Start(server)
		}
	}
	return "", nil, fmt.Errorf("server offers neither PLAIN nor LOGIN authentication (offers %q)", strings.Join(server.Auth, " "))
}

func (a *plainOrLogin) Next(fromServer []byte, more bool) ([]byte, error) {
	return a.chosen.Next(fromServer, more)
}
