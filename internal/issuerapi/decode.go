package issuerapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/palisade-auth/palisade/internal/apperr"
)

func errMalformed(msg string) *apperr.Error {
	return apperr.New(apperr.KindMalformed, "malformed_request", msg)
}

// readBody reads a JSON request body, enforcing the media type and the size
// limit. The raw bytes are returned for the idempotency fingerprint.
func (a *API) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if !isJSON(r.Header.Get("Content-Type")) {
		return nil, apperr.New(apperr.KindUnsupportedMedia, "unsupported_media_type", "The request body must be application/json.")
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, a.cfg.MaxBodyBytes))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return nil, apperr.New(apperr.KindTooLarge, "payload_too_large", "The request body is too large.")
	}
	if err != nil {
		return nil, errMalformed("The request body could not be read.")
	}
	return body, nil
}

// isJSON accepts application/json with at most a UTF-8 charset parameter.
func isJSON(ct string) bool {
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil || mt != "application/json" {
		return false
	}
	for k, v := range params {
		if k != "charset" || !strings.EqualFold(v, "utf-8") {
			return false
		}
	}
	return true
}

// decodeJSON reads one JSON object into dst. Unknown fields are ignored;
// wrong types, trailing data and anything but an object are malformed.
func decodeJSON(body []byte, dst any) error {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return errMalformed("The request body must be a JSON object.")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(dst); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) && typeErr.Field != "" {
			e := errMalformed("A field has the wrong type.")
			e.Fields = []apperr.FieldError{{Field: typeErr.Field, Code: "wrong_type", Message: "This field must be a " + typeErr.Type.String() + "."}}
			return e
		}
		return errMalformed("The request body is not valid JSON.")
	}
	if _, err := dec.Token(); err != io.EOF {
		return errMalformed("The request body has data after the JSON object.")
	}
	return nil
}

// decode is readBody followed by decodeJSON.
func (a *API) decode(w http.ResponseWriter, r *http.Request, dst any) error {
	body, err := a.readBody(w, r)
	if err != nil {
		return err
	}
	return decodeJSON(body, dst)
}
