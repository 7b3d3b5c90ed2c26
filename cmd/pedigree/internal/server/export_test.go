package server

// SetReportedProtocol makes this process's servers say protocol p (another
// release's stand-in), until the returned func puts it back.
func SetReportedProtocol(p string) (restore func()) {
	old := reportedProtocol
	reportedProtocol = p
	return func() { reportedProtocol = old }
}
