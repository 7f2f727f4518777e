package sqlstore

// ParseURL and DefaultConnectTimeout expose the URL handling to the
// external tests.
var ParseURL = parseURL

const DefaultConnectTimeout = defaultConnectTimeout
