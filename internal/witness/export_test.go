package witness

import "time"

// SetReadTimeout bounds reading a request, for a test that cannot wait
// for the default.
func SetReadTimeout(d time.Duration) func() {
	old := readTimeout
	readTimeout = d
	return func() { readTimeout = old }
}
