package issuerapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"reflect"
	"strings"

	"github.com/palisade-auth/palisade/internal/apperr"
	"github.com/palisade-auth/palisade/internal/httpserver"
	"github.com/palisade-auth/palisade/internal/text"
)

func errMalformed(msg string) *apperr.Error {
	return apperr.New(apperr.KindMalformed, "malformed_request", msg)
}

// readBody reads a JSON request body, enforcing the media type and the size
// limit. The raw bytes are returned for the idempotency fingerprint;
// release gives up their buffer.
func (a *API) readBody(w http.ResponseWriter, r *http.Request) (body []byte, release func(), err error) {
	if !isJSON(r.Header.Get("Content-Type")) {
		return nil, nil, apperr.New(apperr.KindUnsupportedMedia, "unsupported_media_type", "The request body must be application/json.")
	}
	if body, ok := peeked(r); ok {
		return body, func() {}, nil // counted by the peek, released by its caller
	}
	body, release, err = a.bodies.read(http.MaxBytesReader(w, r.Body, a.cfg.MaxBodyBytes), r.ContentLength, a.cfg.MaxBodyBytes)
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		err = apperr.New(apperr.KindTooLarge, "payload_too_large", "The request body is too large.")
	case errors.Is(err, httpserver.ErrBodyTimeout):
		err = apperr.New(apperr.KindTimeout, "request_timeout", "The request body did not arrive in time.")
	case err != nil:
		err = errMalformed("The request body could not be read.")
	}
	if err != nil {
		release()
		return nil, nil, err
	}
	return body, release, nil
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
	return checkText(reflect.ValueOf(dst), "")
}

// checkText holds every string of a decoded request body to text.Check,
// naming the JSON field that holds it. JSON allows "\u0000" (invalid UTF-8
// the decoder has already replaced), but no field of this API means it.
func checkText(v reflect.Value, field string) error {
	switch v.Kind() {
	case reflect.String:
		return text.Check(field, v.String())
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil
		}
		return checkText(v.Elem(), field)
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
			if err := checkText(v.Field(i), name); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			if err := checkText(v.Index(i), field); err != nil {
				return err
			}
		}
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			if err := checkText(it.Key(), field); err != nil {
				return err
			}
			if err := checkText(it.Value(), field); err != nil {
				return err
			}
		}
	}
	return nil
}

// maxQueryParams bounds the parameters of a request's query: no route
// takes more than six. Parsed, as every request's query is here, Go's
// limit of 10,000 made 38 KB of query about 1 MB of garbage per request:
// 500 clients sending 9,900 parameters to the key set held the issuer to
// 21 answers a second, a concurrent refresh waited 27 s, and its RSS
// reached 192 MiB.
const maxQueryParams = 32

// checkURL holds the request's path and every query parameter, decoded, to
// text.Check: what reaches a service as an id or a filter comes from there.
func checkURL(r *http.Request) error {
	if err := text.Check("path", r.URL.Path); err != nil {
		return err
	}
	if strings.Count(r.URL.RawQuery, "&") >= maxQueryParams {
		return errMalformed(fmt.Sprintf("The URL's query has more than %d parameters.", maxQueryParams))
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return errMalformed("The URL's query is not valid.")
	}
	for k, vs := range q {
		if err := text.Check("query", k); err != nil {
			return err
		}
		for _, v := range vs {
			if err := text.Check(k, v); err != nil {
				return err
			}
		}
	}
	return nil
}

// decode is readBody followed by decodeJSON.
func (a *API) decode(w http.ResponseWriter, r *http.Request, dst any) error {
	body, release, err := a.readBody(w, r)
	if err != nil {
		return err
	}
	defer release()
	return decodeJSON(body, dst)
}
