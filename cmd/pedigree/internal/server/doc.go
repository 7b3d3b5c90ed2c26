// Package server is pedigree's sidecar: HTTP/JSON on a unix socket (and
// optionally loopback TCP) in front of one engine, which holds the data
// directory's lock. Clients sign entries, calls and approvals with their own
// keys; the server verifies them against the frozen registry and holds no
// principal's private key, except the Claude Code hook's when its route is
// enabled (EnableClaudeHooks). There is no endpoint that changes the registry.
//
// Client speaks the same API and returns the engine's own types and
// sentinel errors, so the CLI behaves the same through either. Each verb is
// declared once, by role (route_*.go): its route, the server's handler and
// the client's method side by side, so the two sides cannot disagree on a
// method or a path; the server lists its routes when it proves it holds the
// token, and a client refuses a server that lacks one it calls (release.go).
package server
