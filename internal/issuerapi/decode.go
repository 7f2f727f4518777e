package issuerapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"unicode/utf8"

	"github.com/palisade-auth/palisade/internal/apperr"
	"github.com/palisade-auth/palisade/internal/httpserver"
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
	if errors.Is(err, httpserver.ErrBodyTimeout) {
		return nil, apperr.New(apperr.KindTimeout, "request_timeout", "The request body did not arrive in time.")
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
	if field, ok := nulString(reflect.ValueOf(dst), ""); ok {
		e := errMalformed("A field contains a NUL character.")
		e.Fields = []apperr.FieldError{{Field: field, Code: "invalid", Message: "This field must not contain NUL characters."}}
		return e
	}
	return nil
}

// nulString finds a string holding U+0000 in a decoded request and names
// its field. JSON allows "\u0000", but no field of this API means it, and
// PostgreSQL cannot store it: the statement would fail as a server error.
func nulString(v reflect.Value, field string) (string, bool) {
	switch v.Kind() {
	case reflect.String:
		return field, strings.ContainsRune(v.String(), 0)
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return "", false
		}
		return nulString(v.Elem(), field)
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" {
				name = f.Name
			}
			if got, ok := nulString(v.Field(i), name); ok {
				return got, true
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			if got, ok := nulString(v.Index(i), field); ok {
				return got, true
			}
		}
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			if got, ok := nulString(it.Key(), field); ok {
				return got, true
			}
			if got, ok := nulString(it.Value(), field); ok {
				return got, true
			}
		}
	}
	return "", false
}

// validURL reports whether the request's path and query, decoded, are UTF-8
// without NUL: what reaches the store as an id or a filter must be text
// PostgreSQL can take.
func validURL(r *http.Request) bool {
	if !validURLText(r.URL.Path) {
		return false
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return false
	}
	for k, vs := range q {
		if !validURLText(k) {
			return false
		}
		for _, v := range vs {
			if !validURLText(v) {
				return false
			}
		}
	}
	return true
}

func validURLText(s string) bool { return utf8.ValidString(s) && !strings.ContainsRune(s, 0) }

// decode is readBody followed by decodeJSON.
func (a *API) decode(w http.ResponseWriter, r *http.Request, dst any) error {
	body, err := a.readBody(w, r)
	if err != nil {
		return err
	}
	return decodeJSON(body, dst)
}
