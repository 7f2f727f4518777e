package sqlstore

// MapErr exposes the driver-error translation to the external tests.
var MapErr = mapErr
