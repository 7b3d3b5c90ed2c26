package server

// SetWithheldRoutes makes this process's servers made after it neither serve
// nor list the routes of patterns (comma-separated; "*": list none), as a
// stand-in for another build's server, until the returned func puts it back.
func SetWithheldRoutes(patterns string) (restore func()) {
	old := withheldRoutes
	withheldRoutes = patterns
	return func() { withheldRoutes = old }
}
