package webhook

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/palisade-auth/palisade/internal/auth"
	"github.com/palisade-auth/palisade/internal/netguard"
	"github.com/palisade-auth/palisade/internal/store"
	pkgwebhook "github.com/palisade-auth/palisade/pkg/webhook"
)

// result is what one attempt came to.
type result struct {
	status     int           // 0 when no HTTP answer
	err        error         // nil on success; never holds a secret or the body sent
	retryAfter time.Duration // asked for by a 429 or 503; 0 otherwise
}

// deliver makes one attempt of a claimed delivery and records it; when ctx
// ends first (shutdown past its grace) it releases the delivery instead.
func (d *Dispatcher) deliver(ctx context.Context, c store.ClaimedDelivery) {
	started := time.Now()
	r := d.attempt(ctx, c)
	if ctx.Err() != nil {
		d.release(c)
		return
	}
	d.attempts.Inc()
	d.latency.Observe(time.Since(started).Seconds())

	now := d.now()
	attempt := c.Delivery.Attempts + 1
	a := store.WebhookAttempt{At: now, StatusCode: r.status, Status: store.DeliveryDelivered}
	outcome := outcomeDelivered
	if r.err != nil {
		a.Error = r.err.Error()
		if attempt >= d.cfg.MaxAttempts {
			a.Status, outcome = store.DeliveryFailed, outcomeFailed
		} else {
			a.Status, outcome = store.DeliveryPending, outcomeRetry
			a.NextAttemptAt = now.Add(d.retryDelay(attempt, r.retryAfter))
		}
	}
	// The record outlives nothing: it is written even when ctx ends now.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	// The log carries ids, the type, the status code and the error: never a
	// secret, a signature or a body.
	log := d.log.With("endpoint_id", c.Delivery.EndpointID, "delivery_id", c.Delivery.ID,
		"event_type", c.Delivery.EventType, "attempt", attempt)
	if err := d.st.RecordWebhookAttempt(rctx, c.Delivery.ID, a); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			// Deleted with its endpoint, or finished by another replica
			// after this lease lapsed.
			return
		}
		log.Error("webhook attempt not recorded; the delivery is due again when its lease lapses",
			"status_code", r.status, "attempt_err", a.Error, "err", err)
		return
	}
	d.deliveries.WithLabelValues(outcome).Inc()
	switch outcome {
	case outcomeRetry:
		d.scheduled(a.NextAttemptAt)
		log.Warn("webhook delivery failed; will retry", "status_code", r.status, "err", a.Error, "next_attempt_at", a.NextAttemptAt)
	case outcomeFailed:
		log.Error("webhook delivery failed; no attempts left", "status_code", r.status, "err", a.Error)
	}
}

// attempt sends one delivery and classifies the answer.
func (d *Dispatcher) attempt(ctx context.Context, c store.ClaimedDelivery) result {
	body, err := Body(c.Event)
	if err != nil {
		return result{err: fmt.Errorf("build the body: %w", err)}
	}
	ctx, cancel := context.WithTimeout(ctx, d.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.Endpoint.URL, bytes.NewReader(body))
	if err != nil {
		return result{err: errors.New("invalid endpoint URL")}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", UserAgent)
	if err := d.sign(req.Header, c, body); err != nil {
		return result{err: err}
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return result{err: transportError(ctx, err, d.cfg.Timeout)}
	}
	// A few KiB of the answer say why it refused; the rest is not read.
	snippet, rerr := netguard.ReadLimited(resp.Body, netguard.ResponseLimit)
	resp.Body.Close()
	r := result{status: resp.StatusCode}
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		if rerr != nil {
			// Cut off before the answer was complete: not within the timeout.
			r.err = transportError(ctx, rerr, d.cfg.Timeout)
		}
		return r
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		r.err = fmt.Errorf("%s: redirects are not followed", resp.Status)
	default:
		r.err = fmt.Errorf("%s%s", resp.Status, excerpt(snippet))
	}
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		r.retryAfter = retryAfter(resp.Header.Get("Retry-After"), d.now(), d.cfg.MaxRetryAfter)
	}
	return r
}

// sign sets the signature headers in the endpoint's format. During a
// rotation's overlap (until PreviousUntil) the seed format signs with the
// previous secret, which receivers still hold; Standard Webhooks sends a
// signature with each.
func (d *Dispatcher) sign(h http.Header, c store.ClaimedDelivery, body []byte) error {
	e := c.Endpoint
	secret, err := d.opener.Open(e.Secret, auth.WebhookSealContext(e.ID))
	if err != nil {
		return errors.New("open the endpoint's secret: sealed under another key or damaged")
	}
	var previous []byte
	if len(e.PreviousSecret) > 0 && e.PreviousUntil != nil && d.now().Before(*e.PreviousUntil) {
		if previous, err = d.opener.Open(e.PreviousSecret, auth.WebhookSealContext(e.ID)); err != nil {
			return errors.New("open the endpoint's previous secret: sealed under another key or damaged")
		}
	}
	now := d.now()
	switch e.Format {
	case store.WebhookFormatStandard:
		var keys [][]byte
		for _, s := range [][]byte{previous, secret} {
			if s == nil {
				continue
			}
			k, err := pkgwebhook.ParseStandardSecret(string(s))
			if err != nil {
				return errors.New("the endpoint's secret is not a Standard Webhooks secret")
			}
			keys = append(keys, k)
		}
		pkgwebhook.SetStandardHeaders(h, keys, c.Event.ID, now, body)
	default:
		if previous != nil {
			secret = previous
		}
		pkgwebhook.SetHeaders(h, secret, c.Event.ID, now, body)
	}
	return nil
}

// transportError describes a failure to get an answer without the URL,
// which may carry a credential in its query.
func transportError(ctx context.Context, err error, timeout time.Duration) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("no answer within %v", timeout)
	}
	var uerr *url.Error
	if errors.As(err, &uerr) {
		if uerr.Timeout() {
			return fmt.Errorf("no answer within %v", timeout)
		}
		err = uerr.Err
	}
	return err
}

// excerpt is the start of a refusal's body for last_error: printable text
// only, at most 200 bytes.
func excerpt(b []byte) string {
	const n = 200
	var sb strings.Builder
	for len(b) > 0 && sb.Len() < n {
		r, size := utf8.DecodeRune(b)
		b = b[size:]
		switch {
		case r == utf8.RuneError && size <= 1:
			continue
		case unicode.IsSpace(r):
			r = ' '
		case !unicode.IsPrint(r):
			continue
		}
		sb.WriteRune(r)
	}
	s := strings.TrimSpace(sb.String())
	if s == "" {
		return ""
	}
	return ": " + s
}

// retryAfter reads a Retry-After header, seconds or an HTTP date, as a
// wait from now at most limit; 0 when absent or unusable.
func retryAfter(v string, now time.Time, limit time.Duration) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	var d time.Duration
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		d = time.Duration(min(secs, int64(limit/time.Second)+1)) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(now)
	}
	return min(max(d, 0), limit)
}

// retryDelay is the wait after the attempt-th failure (1-based): Retry-After
// when the endpoint asked for one, otherwise drawn uniformly in
// [0, RetryBackoff × 2^(attempt-1)], capped at MaxBackoff (full jitter),
// and at least a second.
func (d *Dispatcher) retryDelay(attempt int, asked time.Duration) time.Duration {
	if asked > 0 {
		return max(asked, minRetryDelay)
	}
	ceiling := d.cfg.RetryBackoff
	for i := 1; i < attempt && ceiling < d.cfg.MaxBackoff; i++ {
		ceiling *= 2
	}
	ceiling = min(ceiling, d.cfg.MaxBackoff)
	return max(time.Duration(d.fraction()*float64(ceiling)), minRetryDelay)
}

// fraction is a uniform number in [0, 1) from the injected randomness; 0.5
// if it fails.
func (d *Dispatcher) fraction() float64 {
	var b [8]byte
	d.randMu.Lock()
	_, err := io.ReadFull(d.rand, b[:])
	d.randMu.Unlock()
	if err != nil {
		return 0.5
	}
	return float64(binary.BigEndian.Uint64(b[:])>>11) / (1 << 53)
}
