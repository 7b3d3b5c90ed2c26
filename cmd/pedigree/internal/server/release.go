package server

import (
	"errors"
	"fmt"
	"strings"
)

// Which release a server is, as far as a client cares: the routes it serves.
// A server lists them (route.go's verbs, as "METHOD PATTERN") when it proves
// it holds the directory's token (auth.go), and a client refuses a server
// that lacks any route this build calls, with ErrOtherRelease naming them,
// rather than send it a request it would fail on a route it does not have:
// after an upgrade, a server started on demand by the old binary would
// otherwise fail every hook event for as long as the session kept it busy.
// The hook stops such a server and starts its own (StopOnDemand dials
// without this check); a server a person started is theirs to restart.
//
// A server of a newer build that serves more routes is used. Builds before
// the list said a protocol number instead and list nothing, so they are
// refused (they lack every route, as far as a client can tell); this build's
// server still says the number they check ("protocol": 1), so that their
// clients keep using it.
const legacyProtocol = 1

// ErrOtherRelease: the directory's server is another pedigree release (it
// does not serve every route this build's client calls), so this build's
// client does not use it.
var ErrOtherRelease = errors.New("the running server is another pedigree release")

// sameRelease passes on a dialled client whose server serves every route
// this build calls, and closes and refuses one whose server does not.
func sameRelease(c *Client, socket string, err error) (*Client, error) {
	if err != nil {
		return nil, err
	}
	if len(c.missing) > 0 {
		c.Close()
		return nil, fmt.Errorf("%w (the server on %s does not serve %s): stop it and start it again with this pedigree ('pedigree serve')",
			ErrOtherRelease, socket, lacks(c.missing))
	}
	return c, nil
}

// lacks names the missing routes: all of them, when the server listed none.
func lacks(missing []string) string {
	if len(missing) == len(verbs) {
		return "the routes this pedigree calls: it lists none"
	}
	return strings.Join(missing, ", ")
}
