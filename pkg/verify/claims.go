package verify

import (
	"bytes"
	"errors"
	"math"
	"strconv"
	"time"
)

// claimSet is the payload as the verifier reads it: the registered claims
// it checks plus the identity claims of API.md section 3. Other claims are
// ignored.
type claimSet struct {
	Iss            string      `json:"iss"`
	Sub            string      `json:"sub"`
	Aud            audience    `json:"aud"`
	Exp            numericDate `json:"exp"`
	Nbf            numericDate `json:"nbf"`
	Iat            numericDate `json:"iat"`
	Jti            string      `json:"jti"`
	Sid            string      `json:"sid"`
	Role           string      `json:"role"`
	TenantID       string      `json:"tenant_id"`
	OrganizationID string      `json:"organization_id"`
}

// maxDateSeconds bounds a NumericDate to the year 9999, so that absurd
// values are refused instead of overflowing time arithmetic.
const maxDateSeconds = 253402300799

// numericDate is a JWT NumericDate (RFC 7519 section 2): seconds since the
// epoch, integer or not.
type numericDate struct {
	t   time.Time
	set bool
}

var (
	errDateType  = errors.New("date claim is not a number")
	errDateRange = errors.New("date claim out of range")
	errAudType   = errors.New("aud is neither a string nor an array of strings")
)

// UnmarshalJSON reads a JSON number; null and strings are refused.
func (d *numericDate) UnmarshalJSON(b []byte) error {
	if len(b) == 0 || (b[0] != '-' && (b[0] < '0' || b[0] > '9')) {
		return errDateType
	}
	if bytes.ContainsAny(b, ".eE") {
		f, err := strconv.ParseFloat(string(b), 64)
		if err != nil || math.Abs(f) > maxDateSeconds {
			return errDateRange
		}
		sec := math.Floor(f)
		nsec := min(int64((f-sec)*1e9), 999999999)
		d.t, d.set = time.Unix(int64(sec), nsec).UTC(), true
		return nil
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil || n > maxDateSeconds || n < -maxDateSeconds {
		return errDateRange
	}
	d.t, d.set = time.Unix(n, 0).UTC(), true
	return nil
}

// audience is the aud claim: one string or an array of strings (RFC 7519
// section 4.1.3).
type audience struct {
	list []string
	set  bool
}

// UnmarshalJSON reads a string or an array of strings. The input has
// already been validated by encoding/json, so only types need checking.
func (a *audience) UnmarshalJSON(b []byte) error {
	s := scanner{b: b}
	if len(b) > 0 && b[0] == '"' {
		v, err := s.str()
		if err != nil {
			return err
		}
		a.list, a.set = []string{string(v)}, true
		return nil
	}
	if !s.consume('[') {
		return errAudType
	}
	a.list, a.set = []string{}, true
	s.ws()
	if s.consume(']') {
		return nil
	}
	for {
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != '"' {
			return errAudType
		}
		v, err := s.str()
		if err != nil {
			return err
		}
		a.list = append(a.list, string(v))
		s.ws()
		if s.consume(',') {
			continue
		}
		if s.consume(']') {
			return nil
		}
		return errAudType
	}
}

func (a *audience) contains(want string) bool {
	for _, s := range a.list {
		if s == want {
			return true
		}
	}
	return false
}
