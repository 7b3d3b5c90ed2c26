package server

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// A verb is one of the engine's verbs on the wire: its method, its path
// pattern and the server's handler. The server serves it and this build's
// client calls the same value, so the two cannot disagree on a method or a
// path; and the server lists every verb it serves when it proves it holds
// the token (auth.go), so a client knows, before it sends anything else,
// whether the server has every route it calls (sameRelease).
//
// Each verb is declared in the file of its role (route_record.go for
// pedigree.Recorder, route_check.go for Checker and Reviewer, route_audit.go
// for Auditor, route_log.go for Prover) with its handler and the client's
// method beside it, and named once in verbs below. Adding a verb is that
// declaration and that line: no number to raise, no other file. A route
// whose request or answer changes meaning gets a new path instead, so that a
// server of an earlier build is seen to lack it.
type verb struct {
	method, pattern string
	serve           func(s *Server, w http.ResponseWriter, r *http.Request) error
}

// verbs is every verb this build's server serves and its client calls.
var verbs = []*verb{
	&getRegistry, &getContext, &getContextRef, &getResolve, &postEntry, &getByContent, &getEntry, &postRecall,
	&postCheck, &getDecisions, &getDecision, &getSubject, &postApproval, &postRejection, &getPending, &getReviews,
	&getTrace, &postVerify, &getReevaluation, &getTrajectory, &getRefusals,
	&getLogHead, &postCheckpoint, &getInclusion, &getConsistency, &postInclusionAgainst, &postConsistencyFrom,
	&postUILogin,
}

func (v *verb) String() string { return v.method + " " + v.pattern }

// A request is what the client sends for one verb: its method and its path,
// with the pattern's names filled in and the query.
type request struct{ method, path string }

// at is the verb's request with the pattern's {names} filled in order by
// args, each escaped as one path segment (a dot segment too). A count of
// args that does not match the pattern is a mistake in this package, and
// panics.
func (v *verb) at(args ...string) request {
	var b strings.Builder
	rest := v.pattern
	for {
		i := strings.IndexByte(rest, '{')
		if i < 0 {
			break
		}
		j := strings.IndexByte(rest[i:], '}')
		if len(args) == 0 || j < 0 {
			panic(fmt.Sprintf("server: %s filled with too few values", v))
		}
		b.WriteString(rest[:i])
		if args[0] == "." || args[0] == ".." {
			// A dot segment as it is would be cleaned away by the
			// server's router (a redirect to another route); escaped,
			// the route's {name} reads it back.
			b.WriteString(strings.Repeat("%2E", len(args[0])))
		} else {
			b.WriteString(url.PathEscape(args[0]))
		}
		rest, args = rest[i+j+1:], args[1:]
	}
	if len(args) > 0 {
		panic(fmt.Sprintf("server: %s filled with too many values", v))
	}
	b.WriteString(rest)
	return request{v.method, b.String()}
}

// with is the request with its query.
func (r request) with(q url.Values) request {
	r.path += "?" + q.Encode()
	return r
}

// withheldRoutes, when set at link time (-ldflags -X), is a comma-separated
// list of patterns this build's server neither serves nor lists ("*": none
// is listed, as from a build before the list): how the tests build a
// stand-in for another build's server. Empty in every release.
var withheldRoutes string

// served is the verbs this build's server serves and lists.
func served() []*verb {
	if withheldRoutes == "*" {
		return nil
	}
	withheld := strings.Split(withheldRoutes, ",")
	return slices.DeleteFunc(slices.Clone(verbs), func(v *verb) bool { return slices.Contains(withheld, v.pattern) })
}

// missing is the verbs this build's client calls that a server's list
// (routes, as "METHOD PATTERN") does not name.
func missing(routes []string) []string {
	var out []string
	for _, v := range verbs {
		if !slices.Contains(routes, v.String()) {
			out = append(out, v.String())
		}
	}
	return out
}
