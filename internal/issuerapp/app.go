// Package issuerapp owns the assembly of the issuer: it turns a validated
// configuration into a store, keys, services and servers, so that the cobra
// commands stay wiring-free and tests can build the same program in-process.
package issuerapp

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"time"

	"github.com/palisade-auth/palisade/internal/auth"
	"github.com/palisade-auth/palisade/internal/config"
	"github.com/palisade-auth/palisade/internal/keys"
	"github.com/palisade-auth/palisade/internal/netguard"
	"github.com/palisade-auth/palisade/internal/password"
	"github.com/palisade-auth/palisade/internal/store/sqlstore"
	"github.com/palisade-auth/palisade/internal/token"
)

// App is an opened issuer: database, keys and the flows over them.
type App struct {
	Cfg    config.Issuer
	Log    *slog.Logger
	Store  *sqlstore.Store
	Sealer *keys.Sealer
	Keys   *keys.Manager
	// Guard applies the outbound URL rules to webhook endpoints, at
	// registration and when delivering (--webhook-allow-cidr).
	Guard *netguard.Guard
	now   func() time.Time
}

// Open connects to the database (applying migrations when migrate is set)
// and loads the key-encryption key.
func Open(ctx context.Context, cfg config.Issuer, log *slog.Logger, migrate bool) (*App, error) {
	st, err := sqlstore.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		return nil, err
	}
	if migrate {
		if err := st.Migrate(ctx); err != nil {
			st.Close()
			return nil, err
		}
	}
	keks, err := loadKEK(cfg, log)
	if err != nil {
		st.Close()
		return nil, err
	}
	sealer, err := keys.NewKeyring(keks, rand.Reader)
	if err != nil {
		st.Close()
		return nil, err
	}
	now := time.Now
	km := keys.NewManager(st, sealer, keys.Options{
		AccessTokenTTL: cfg.AccessTokenTTL, ClockSkew: cfg.ClockSkew, ReloadInterval: cfg.KeyReloadInterval,
		ActivateIn: cfg.ActivateIn, RotationInterval: cfg.KeyRotationInterval,
	}, now, rand.Reader)
	return &App{
		Cfg: cfg, Log: log, Store: st, Sealer: sealer, Keys: km,
		Guard: netguard.New(netguard.Config{Allow: cfg.WebhookGuard.Allow()}), now: now,
	}, nil
}

// loadKEK reads the key-encryption keys, newest first. Only the embedded default may
// generate a missing one: a production deployment that lost its secret must
// fail loudly rather than seal new keys under a key nobody backed up.
func loadKEK(cfg config.Issuer, log *slog.Logger) ([][]byte, error) {
	keks, err := keys.LoadKEKFile(cfg.KEKFile)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return keks, err
	}
	if !cfg.Embedded() {
		return nil, fmt.Errorf("key-encryption key file %s does not exist (generate one with: head -c 32 /dev/urandom | base64 > %s)", cfg.KEKFile, cfg.KEKFile)
	}
	kek, err := keys.GenerateKEKFile(cfg.KEKFile, rand.Reader)
	if errors.Is(err, fs.ErrExist) {
		// Another process created it first; use theirs.
		return keys.LoadKEKFile(cfg.KEKFile)
	}
	if err != nil {
		return nil, err
	}
	log.Warn("generated a development key-encryption key; mount a real secret in production", "path", cfg.KEKFile)
	return [][]byte{kek}, nil
}

// CheckKEK fails, naming --kek-file, when the key-encryption keys do not
// open the key that signs now: what a command seals under them (a webhook
// secret, a mail's link token) only replicas holding the same keys could
// open. A database without a key yet passes.
func (a *App) CheckKEK(ctx context.Context) error {
	if err := a.Keys.CanSign(ctx); err != nil && !errors.Is(err, keys.ErrNoActiveKey) {
		return a.kekError(err)
	}
	return nil
}

// kekError names --kek-file in err when the key-encryption keys did not
// open a signing key.
func (a *App) kekError(err error) error {
	if !errors.Is(err, keys.ErrSealed) {
		return err
	}
	return fmt.Errorf("--kek-file %s does not open the signing keys in the database: they were sealed under another key-encryption key (to change it, list the new key first and the old one after it, then run issuer keys reseal): %w", a.Cfg.KEKFile, err)
}

// Close releases the database.
func (a *App) Close() error { return a.Store.Close() }

// OperatorAuth is the flow service of the command line, which creates and
// administers accounts but issues no tokens: its configuration has no
// issuer URL, audience or token lifetimes. The mails and deliveries it
// queues are sent by a running issuer, within its poll interval.
func (a *App) OperatorAuth() *auth.Service {
	return a.newAuth(password.NewHasher(password.DefaultParams, 0, rand.Reader), nil, nil)
}

// newAuth builds the flows with the password hasher and the wake-ups of
// the workers that deliver what the flows queue (nil: nobody to wake).
func (a *App) newAuth(hasher *password.Hasher, mailQueued, webhookQueued func()) *auth.Service {
	cfg := a.Cfg
	return auth.New(auth.Deps{
		Store:           a.Store,
		Hasher:          hasher,
		Policy:          password.DefaultPolicy(),
		Minter:          token.NewMinter(a.Keys, cfg.IssuerURL, cfg.Audience, cfg.AccessTokenTTL, a.now, rand.Reader),
		SuccessorSecret: a.Sealer.DeriveSecret("refresh-successor"),
		Logger:          a.Log,
		Now:             a.now,
		Rand:            rand.Reader,
		Sealer:          a.Sealer,
		MailQueued:      orNoop(mailQueued),
		WebhookURLs:     a.Guard,
		WebhookQueued:   orNoop(webhookQueued),
		Keys:            a.Keys,
	}, auth.Config{
		RefreshTokenTTL: cfg.RefreshTokenTTL, RefreshReuseLeeway: cfg.RefreshReuseLeeway, SessionMaxLifetime: cfg.SessionMaxLifetime,
		MaxSessionsPerUser: cfg.MaxSessionsPerUser,
		ResetTokenTTL:      cfg.ResetTokenTTL, VerifyTokenTTL: cfg.VerifyTokenTTL, RequireVerifiedEmail: cfg.RequireVerifiedEmail,
		KeyActivateIn: cfg.ActivateIn,
	})
}

func orNoop(f func()) func() {
	if f == nil {
		return func() {}
	}
	return f
}
