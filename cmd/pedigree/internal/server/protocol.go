package server

import (
	"errors"
	"fmt"
	"strconv"
)

// Protocol is what this build's client needs of a server: the routes it
// calls and what they answer. It goes up by one whenever a route the client
// calls is added or changes meaning, and a server says its number when it
// proves it holds the directory's token (see auth.go). A client refuses a
// server that says another number (0: a release from before the number,
// which has no context-reference route) with ErrOtherRelease, naming both,
// rather than send it a request it would fail on a route it does not have:
// after an upgrade, a server started on demand by the old binary would
// otherwise fail every hook event for as long as the session kept it busy.
// The hook stops such a server and starts its own (StopOnDemand dials
// without this check); a server a person started is theirs to restart.
const Protocol = 1

// reportedProtocol, when set at link time (-ldflags -X), is the number this
// build's server says instead of Protocol: how the tests build a stand-in
// for another release's server. Empty in every release.
var reportedProtocol string

// serverProtocol is the number this build's server says.
func serverProtocol() int {
	if reportedProtocol == "" {
		return Protocol
	}
	n, err := strconv.Atoi(reportedProtocol)
	if err != nil {
		return 0
	}
	return n
}

// ErrOtherRelease: the directory's server is another pedigree release (it
// says another Protocol), so this build's client does not use it.
var ErrOtherRelease = errors.New("the running server is another pedigree release")

// sameRelease passes on a dialled client of this release, and closes and
// refuses one whose server said another protocol.
func sameRelease(c *Client, socket string, err error) (*Client, error) {
	if err != nil {
		return nil, err
	}
	if c.protocol != Protocol {
		c.Close()
		return nil, fmt.Errorf("%w (the server on %s speaks protocol %d, this pedigree %d): stop it and start it again with this pedigree ('pedigree serve')",
			ErrOtherRelease, socket, c.protocol, Protocol)
	}
	return c, nil
}
