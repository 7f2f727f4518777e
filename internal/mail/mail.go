// Package mail owns the delivery of account mails: it renders the
// password-reset and email-verification mails, and the notices of a changed
// or reset password, from embedded templates, sends them by SMTP or to the
// log, and runs the worker that drains the durable mail queue the account
// flows fill.
package mail

import (
	"bytes"
	"embed"
	"fmt"
	htmltemplate "html/template"
	"net/url"
	"strings"
	texttemplate "text/template"
	"time"

	"github.com/palisade-auth/palisade/internal/auth"
	"github.com/palisade-auth/palisade/internal/store"
)

// Message is one rendered mail, ready for a Sender.
type Message struct {
	// ID identifies the mail (the queue job's id). SMTP uses it as the
	// Message-ID, so a repeated delivery of one job is recognisable as such.
	ID      string
	Date    time.Time
	To      string
	ToName  string
	Subject string
	Text    string
	HTML    string
	// Link is the action link the mail carries; the log sender shows it on
	// its own line so a developer can follow it.
	Link string
}

//go:embed templates
var templateFS embed.FS

// kind is how one kind of mail is rendered.
type kind struct {
	subject string
	path    string // of the link, under the public URL; "" for a notice
	text    *texttemplate.Template
	html    *htmltemplate.Template
}

// notice reports whether the kind is a notice: a mail without a link,
// rendered by ComposeNotice.
func (k kind) notice() bool { return k.path == "" }

// The templates are part of the binary: a parse error is a programming
// error caught by every test run, so Must is right here.
var kinds = map[string]kind{
	store.PurposePasswordReset: {
		subject: "Reset your password",
		path:    "/reset-password",
		text:    texttemplate.Must(texttemplate.ParseFS(templateFS, "templates/password_reset.txt")),
		html:    htmltemplate.Must(htmltemplate.ParseFS(templateFS, "templates/password_reset.html")),
	},
	store.PurposeVerifyEmail: {
		subject: "Verify your email address",
		path:    "/verify-email",
		text:    texttemplate.Must(texttemplate.ParseFS(templateFS, "templates/verify_email.txt")),
		html:    htmltemplate.Must(htmltemplate.ParseFS(templateFS, "templates/verify_email.html")),
	},
	store.MailPasswordChanged: {
		subject: "Your password was changed",
		text:    texttemplate.Must(texttemplate.ParseFS(templateFS, "templates/password_changed_notice.txt")),
		html:    htmltemplate.Must(htmltemplate.ParseFS(templateFS, "templates/password_changed_notice.html")),
	},
	store.MailPasswordReset: {
		subject: "Your password was reset",
		text:    texttemplate.Must(texttemplate.ParseFS(templateFS, "templates/password_reset_notice.txt")),
		html:    htmltemplate.Must(htmltemplate.ParseFS(templateFS, "templates/password_reset_notice.html")),
	},
}

// IsNotice reports whether kindName is a notice: a mail that carries no
// link, only what happened (auth.Notice).
func IsNotice(kindName string) bool {
	k, ok := kinds[kindName]
	return ok && k.notice()
}

// Link is the URL a mail of kind carries for token, as API.md section 7
// fixes it: <public-url>/reset-password?token=<token> or
// <public-url>/verify-email?token=<token>. The token is query-escaped; the
// opaque tokens are base64url, so in practice it stays as it is.
func Link(kindName, publicURL, token string) (string, error) {
	k, ok := kinds[kindName]
	if !ok || k.notice() {
		return "", fmt.Errorf("mail: kind %q has no link", kindName)
	}
	return strings.TrimSuffix(publicURL, "/") + k.path + "?token=" + url.QueryEscape(token), nil
}

// templateData is what the templates see.
type templateData struct {
	Name     string
	Email    string
	Link     string
	Lifetime string // how long the link works, "" when unknown
}

// Compose renders the mail of kind for a recipient: a text and an HTML part,
// both carrying the link. ttl is the link's lifetime, mentioned in the mail
// when it is above zero.
func Compose(kindName, publicURL, to, name, token string, ttl time.Duration) (Message, error) {
	k, ok := kinds[kindName]
	if !ok || k.notice() {
		return Message{}, fmt.Errorf("mail: unknown kind of link mail %q", kindName)
	}
	link, err := Link(kindName, publicURL, token)
	if err != nil {
		return Message{}, err
	}
	d := templateData{Name: name, Email: to, Link: link, Lifetime: humanDuration(ttl)}
	var text, html bytes.Buffer
	if err := k.text.Execute(&text, d); err != nil {
		return Message{}, fmt.Errorf("mail: render %s text: %w", kindName, err)
	}
	if err := k.html.Execute(&html, d); err != nil {
		return Message{}, fmt.Errorf("mail: render %s html: %w", kindName, err)
	}
	return Message{To: to, ToName: name, Subject: k.subject, Text: text.String(), HTML: html.String(), Link: link}, nil
}

// noticeData is what the templates of notices see.
type noticeData struct {
	Name      string
	Email     string
	When      string // "2006-01-02 15:04:05 UTC"
	IP        string // "" when unknown
	UserAgent string // "" when unknown
}

// maxNoticeUserAgent bounds the user agent a notice quotes: the client
// chose it, and the mail is no place for a page of it.
const maxNoticeUserAgent = 200

// ComposeNotice renders a notice of kind (store.MailPasswordChanged,
// store.MailPasswordReset) for a recipient: what happened, when (UTC), from
// which client address and user agent, and what to do if it was not them.
// A notice carries no link and no token.
func ComposeNotice(kindName, to, name string, n auth.Notice) (Message, error) {
	k, ok := kinds[kindName]
	if !ok || !k.notice() {
		return Message{}, fmt.Errorf("mail: unknown kind of notice %q", kindName)
	}
	ua := n.UserAgent
	if len(ua) > maxNoticeUserAgent {
		ua = strings.ToValidUTF8(ua[:maxNoticeUserAgent], "") + "…"
	}
	d := noticeData{Name: name, Email: to, When: n.At.UTC().Format("2006-01-02 15:04:05 UTC"), IP: n.IP, UserAgent: ua}
	var text, html bytes.Buffer
	if err := k.text.Execute(&text, d); err != nil {
		return Message{}, fmt.Errorf("mail: render %s text: %w", kindName, err)
	}
	if err := k.html.Execute(&html, d); err != nil {
		return Message{}, fmt.Errorf("mail: render %s html: %w", kindName, err)
	}
	return Message{To: to, ToName: name, Subject: k.subject, Text: text.String(), HTML: html.String()}, nil
}

// humanDuration says d in words for a mail: "30 minutes", "48 hours",
// "7 days"; "" for zero or less.
func humanDuration(d time.Duration) string {
	plural := func(n int64, unit string) string {
		if n == 1 {
			return "1 " + unit
		}
		return fmt.Sprintf("%d %ss", n, unit)
	}
	switch {
	case d <= 0:
		return ""
	case d%(24*time.Hour) == 0 && d >= 72*time.Hour:
		return plural(int64(d/(24*time.Hour)), "day")
	case d%time.Hour == 0:
		return plural(int64(d/time.Hour), "hour")
	case d%time.Minute == 0:
		return plural(int64(d/time.Minute), "minute")
	default:
		return plural(int64((d+time.Second-1)/time.Second), "second")
	}
}
