package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// Format names how deliveries are signed. The values are those of the
// issuer's endpoint "format" field.
type Format string

// The formats a Handler verifies.
const (
	// FormatSeed is the seed's format (Verify): hex HMAC over
	// timestamp.body, keyed with the secret's bytes; the event id is the
	// body's "id".
	FormatSeed Format = "seed"
	// FormatStandard is the Standard Webhooks format (VerifyStandard):
	// "v1,<base64>" HMAC over id.timestamp.body, keyed with the decoded
	// "whsec_" secret; the event id is the webhook-id header.
	FormatStandard Format = "standard-webhooks"
)

// DefaultMaxBodyBytes is the body limit of a Handler whose Config leaves
// MaxBodyBytes at 0.
const DefaultMaxBodyBytes = 1 << 20

// retryAfterSeconds is what a Handler asks a sender to wait before
// retrying a delivery whose id another request is processing.
const retryAfterSeconds = "5"

// Config configures a Handler.
type Config struct {
	// Format is how deliveries are signed; "" means FormatSeed.
	Format Format
	// Secrets are the endpoint's secrets exactly as the issuer showed
	// them: the bytes of the text for FormatSeed, the "whsec_..." text for
	// FormatStandard. Give the old and the new secret while the issuer
	// rotates. At least one is required.
	Secrets [][]byte
	// Store remembers the ids seen; nil means NewMemoryStore(0, 0).
	Store Store
	// MaxBodyBytes limits the body; larger bodies are answered 413. Zero
	// means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Handler verifies webhook deliveries and passes each event to the app
// once. It answers itself, without calling the app:
//
//   - 405 to a method other than POST, 413 to a body over the limit;
//   - 401 when no signature matches (ErrSignature);
//   - 400 to a timestamp more than Tolerance away, to missing or
//     malformed headers, and to a seed-format body without a string "id"
//     or whose "id" differs from Webhook-Id;
//   - 200 to an event id already processed successfully (a duplicate);
//   - 503 with Retry-After to an event id another request is processing
//     at this moment (the sender retries, and the retry gets 200 or is
//     processed, depending on how the first one ended);
//   - 500 when the Store fails.
//
// Otherwise the app is called with the verified body (Body and GetBody
// both serve it, so it can be read more than once) and the event id in the
// request context (IDFromContext). The id is claimed in the Store before
// the call, atomically, so concurrent deliveries of one id call the app
// once. When the app answers 2xx (or writes nothing, which is 200) the id
// is marked done and later deliveries of it are acknowledged without the
// app. When it answers anything else, or panics, the claim is released:
// the sender counts the delivery as failed and retries, and the retry is
// processed. The app should therefore answer 2xx only for an event it has
// accepted (stored or processed), since that answer is what the id's
// "done" stands for. A Store error while ending a claim is not reported:
// when Complete fails the sender already has its 2xx, and at worst a
// redelivery is processed again (delivery is at least once in any case);
// when Release fails the id stays in progress until the claim lapses, and
// retries get 503 until then.
type Handler struct {
	app     http.Handler
	format  Format
	keys    [][]byte
	store   Store
	maxBody int64
	now     func() time.Time
}

// NewHandler returns a Handler that passes verified, first-seen events to
// app. It returns an error for an unknown Format, no secrets, an empty
// secret, or a FormatStandard secret that is not "whsec_" and base64.
func NewHandler(app http.Handler, cfg Config) (*Handler, error) {
	h := &Handler{app: app, format: cfg.Format, store: cfg.Store, maxBody: cfg.MaxBodyBytes, now: cfg.Now}
	if app == nil {
		return nil, errors.New("webhook: nil app handler")
	}
	if h.format == "" {
		h.format = FormatSeed
	}
	switch h.format {
	case FormatSeed:
		h.keys = append([][]byte(nil), cfg.Secrets...)
	case FormatStandard:
		for i, s := range cfg.Secrets {
			k, err := ParseStandardSecret(string(s))
			if err != nil {
				return nil, fmt.Errorf("secret %d: %w", i, err)
			}
			h.keys = append(h.keys, k)
		}
	default:
		return nil, fmt.Errorf("webhook: unknown format %q", cfg.Format)
	}
	if err := checkSecrets(h.keys); err != nil {
		return nil, err
	}
	if h.store == nil {
		h.store = NewMemoryStore(0, 0)
	}
	if h.maxBody <= 0 {
		h.maxBody = DefaultMaxBodyBytes
	}
	if h.now == nil {
		h.now = time.Now
	}
	return h, nil
}

type idKey struct{}

// NewContext returns a copy of ctx carrying the event id, as the Handler
// does for the app.
func NewContext(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, idKey{}, id)
}

// IDFromContext returns the event id stored by NewContext, and whether
// there was one.
func IDFromContext(ctx context.Context) (string, bool) {
	id, ok := ctx.Value(idKey{}).(string)
	return id, ok
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.maxBody))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "cannot read body", http.StatusBadRequest)
		return
	}
	now := h.now()
	id, err := h.verify(r.Header, body, now)
	if err != nil {
		refuse(w, err)
		return
	}
	ctx := r.Context()
	state, err := h.store.Claim(ctx, id, now)
	if err != nil {
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	switch state {
	case StateDone:
		w.WriteHeader(http.StatusOK)
		return
	case StateInProgress:
		w.Header().Set("Retry-After", retryAfterSeconds)
		http.Error(w, "delivery in progress", http.StatusServiceUnavailable)
		return
	}
	h.serveClaimed(w, r.WithContext(NewContext(ctx, id)), id, body)
}

// serveClaimed calls the app for a claimed id and ends the claim: Complete
// after a 2xx, Release after anything else, a panic included. Both run
// even if the client went away, since the claim outlives the request.
func (h *Handler) serveClaimed(w http.ResponseWriter, r *http.Request, id string, body []byte) {
	ctx := context.WithoutCancel(r.Context())
	rec := &statusRecorder{ResponseWriter: w}
	done := false
	defer func() {
		if done && rec.status() >= 200 && rec.status() < 300 {
			_ = h.store.Complete(ctx, id, h.now())
			return
		}
		_ = h.store.Release(ctx, id)
	}()
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	h.app.ServeHTTP(rec, r)
	done = true // not reached when the app panics
}

// verify checks the signature and timestamp and returns the event id.
func (h *Handler) verify(header http.Header, body []byte, now time.Time) (string, error) {
	if h.format == FormatStandard {
		if err := VerifyStandard(h.keys, header, body, now); err != nil {
			return "", err
		}
		return header.Get(HeaderID), nil
	}
	if err := Verify(h.keys, header, body, now); err != nil {
		return "", err
	}
	return seedID(header, body)
}

// seedID returns the "id" of a verified seed-format body. Webhook-Id is not
// signed in this format, so the id comes from the signed body, and a
// Webhook-Id that disagrees with it is refused.
func seedID(header http.Header, body []byte) (string, error) {
	var ev struct {
		ID *string `json:"id"`
	}
	if err := json.Unmarshal(body, &ev); err != nil {
		return "", fmt.Errorf("%w: not a JSON object with a string id", ErrMalformedBody)
	}
	switch {
	case ev.ID == nil || *ev.ID == "":
		return "", fmt.Errorf("%w: no id", ErrMalformedBody)
	case len(*ev.ID) > MaxIDLength:
		return "", fmt.Errorf("%w: id longer than %d bytes", ErrMalformedBody, MaxIDLength)
	}
	if hv := header.Values(HeaderID); len(hv) > 1 || len(hv) == 1 && hv[0] != *ev.ID {
		return "", fmt.Errorf("%w: %s differs from the body's id", ErrMalformedBody, HeaderID)
	}
	return *ev.ID, nil
}

// refuse answers a refused delivery. The error's detail is not sent.
func refuse(w http.ResponseWriter, err error) {
	status := StatusOf(err)
	msg := "invalid webhook delivery"
	switch status {
	case http.StatusUnauthorized:
		// RFC 9110 requires a challenge with every 401.
		w.Header().Set("WWW-Authenticate", `Webhook-Signature realm="webhook"`)
		msg = "invalid webhook signature"
	case http.StatusInternalServerError:
		msg = "internal error"
	}
	http.Error(w, msg, status)
}

// statusRecorder remembers the status the app answered with.
type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.code == 0 && code >= 200 {
		s.code = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.code == 0 {
		s.code = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Flush lets an app flush through the wrapper.
func (s *statusRecorder) Flush() {
	if s.code == 0 {
		s.code = http.StatusOK
	}
	_ = http.NewResponseController(s.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// status is the answered status; an app that wrote nothing answered 200.
func (s *statusRecorder) status() int {
	if s.code == 0 {
		return http.StatusOK
	}
	return s.code
}
