// Package redisurl owns the address of a Redis rate-limit store,
// redis://[user:pass@]host[:port][/db][?prefix=P] or rediss:// for TLS: its
// schemes, its key-prefix parameter and its redaction. It links no Redis
// client, so the flags can be checked where none belongs: the verifier
// shares the issuer's configuration package.
package redisurl

import (
	"errors"
	"net/url"
	"strconv"
	"strings"
)

// Is reports whether s names a Redis server rather than another kind of
// rate-limit store.
func Is(s string) bool {
	return strings.HasPrefix(s, "redis://") || strings.HasPrefix(s, "rediss://")
}

// Split checks raw's shape and returns it without the prefix parameter,
// for the client, and the key prefix. The client checks the rest (the
// database number, its own parameters) when it parses the URL. Its errors
// never repeat raw: it may carry a password.
func Split(raw string) (client, prefix string, err error) {
	if !Is(raw) {
		return "", "", errors.New("want redis://[user:pass@]host[:port][/db], or rediss:// for TLS")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", "", errors.New("malformed Redis URL")
	}
	if misplacedAt(u) {
		return "", "", errors.New("the Redis URL has an @ after its host: percent-encode any /, ? or # in the user name and password (%2F, %3F, %23), and an @ in the prefix (%40)")
	}
	if u.Hostname() == "" {
		return "", "", errors.New("the Redis URL needs a host")
	}
	// redis://s3cret@cache reads as the user s3cret with no password: the
	// client sends no AUTH, every call fails, and the "user name" is
	// logged as one. With an empty password (redis://bob:@cache) it sends
	// none either, and runs as Redis's default user without a word.
	if password, _ := u.User.Password(); u.User.Username() != "" && password == "" {
		return "", "", errors.New("the Redis URL has a user name but no password: a password alone is written redis://:PASSWORD@host")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return "", "", errors.New("the Redis URL's port must be from 1 to 65535")
		}
	}
	// url.Query would drop a malformed pair without a word, and keep only
	// the first of two prefixes.
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return "", "", errors.New("the Redis URL's parameters are malformed")
	}
	if len(q["prefix"]) > 1 {
		return "", "", errors.New("the Redis URL has more than one prefix")
	}
	prefix = q.Get("prefix")
	q.Del("prefix")
	u.RawQuery = q.Encode()
	return u.String(), prefix, nil
}

// Redact returns raw without its password, for logs; user info without a
// password (which Split refuses: it is most likely a password) is hidden
// whole.
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || misplacedAt(u) {
		return "(a malformed URL, not shown)"
	}
	if _, hasPassword := u.User.Password(); u.User != nil && !hasPassword {
		u.User = url.User("xxxxx")
	}
	return u.Redacted()
}

// misplacedAt reports an @ outside the user info. Such an @ ends a user
// info that an unescaped /, ? or # in the password cut short: the rest of
// the password then parses as the path, query or fragment, where neither
// redaction nor the client's error messages know it for a secret.
func misplacedAt(u *url.URL) bool {
	return strings.Contains(u.Opaque+u.Path+u.RawPath+u.RawQuery+u.Fragment, "@")
}
