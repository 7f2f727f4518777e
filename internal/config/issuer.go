package config

import (
	"errors"

	"github.com/spf13/pflag"
)

// Issuer is the issuer's configuration, made of one part per concern. Each
// part registers its own flags and validates itself; a command registers
// the parts it uses (StoreFlags for every command that opens the database,
// ServeFlags for `issuer serve`, and a few parts on their own: MailLinks
// for `users create`, WebhookGuard for `webhooks create`, --activate-in for
// `keys rotate`). A part a command did not register keeps its zero value,
// which the application reads as "not used here". The parts are embedded
// so that their fields read as one configuration.
type Issuer struct {
	Database
	Keys
	Log
	KeySchedule
	WebhookGuard
	MailLinks

	HTTP
	API
	Tokens
	Passwords
	RateLimits
	Mail
	Webhooks
}

// StoreFlags registers the parts every command that opens the database and
// the keys has.
func (c *Issuer) StoreFlags(fs *pflag.FlagSet) {
	c.Database.Flags(fs)
	c.Keys.Flags(fs)
	c.Log.Flags(fs)
}

// ServeFlags registers every part: the flags of `issuer serve`.
func (c *Issuer) ServeFlags(fs *pflag.FlagSet) {
	c.StoreFlags(fs)
	c.Database.NoMigrateFlag(fs)
	c.KeySchedule.Flags(fs)
	c.WebhookGuard.Flags(fs)
	c.MailLinks.Flags(fs)
	c.HTTP.Flags(fs)
	c.API.Flags(fs)
	c.Tokens.Flags(fs)
	c.Passwords.Flags(fs)
	c.RateLimits.Flags(fs)
	c.Mail.Flags(fs)
	c.Webhooks.Flags(fs)
}

// Validate checks the parts of StoreFlags, and the webhook allow-list
// (valid when not registered), reporting every problem at once.
func (c *Issuer) Validate() error {
	return errors.Join(c.Database.Validate(), c.Keys.Validate(), c.Log.Validate(), c.WebhookGuard.Validate())
}

// ValidateServe checks every part, reporting every problem at once.
func (c *Issuer) ValidateServe() error {
	return errors.Join(
		c.Validate(),
		c.KeySchedule.Validate(c.Keys),
		c.HTTP.Validate(),
		c.API.Validate(),
		c.Tokens.Validate(),
		c.Passwords.Validate(),
		c.RateLimits.Validate(),
		c.Mail.Validate(),
		c.Webhooks.Validate(),
	)
}

// SharedRateLimits reports whether the rate-limit counters live in the
// database: by choice, or by default on PostgreSQL, where several instances
// must share them.
func (c *Issuer) SharedRateLimits() bool { return c.RateLimits.shared(c.Embedded()) }

// LinkBase is the base of the links in mails: --public-url, else
// --issuer-url, without a trailing slash.
func (c *Issuer) LinkBase() string { return c.Mail.linkBase(c.IssuerURL) }
