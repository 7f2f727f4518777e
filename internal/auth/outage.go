package auth

import (
	"errors"

	"github.com/palisade-auth/palisade/internal/apperr"
	"github.com/palisade-auth/palisade/internal/store"
)

// Classify returns the *apperr.Error that err stands for, as apperr.As
// does, with one rule of the domain on top: an error whose chain holds
// store.ErrUnavailable (the database could not be reached) is
// KindUnavailable, whatever kind the flow that met it chose, so that an
// outage is never reported as a fault of ours or of the client. Every
// error the transport writes passes here, so no flow has to remember it.
func Classify(err error) *apperr.Error {
	if errors.Is(err, store.ErrUnavailable) {
		e := apperr.As(err)
		if e.Kind == apperr.KindUnavailable {
			return e
		}
		return apperr.Unavailable(err)
	}
	return apperr.As(err)
}
