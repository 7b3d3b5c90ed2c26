// Package safetext makes text from the record safe to show a person at a
// terminal. Stored content, an upstream's answer, a tool name or an argument
// may carry characters a terminal acts on instead of showing: C0 and C1
// controls (an ESC sequence moves the cursor and rewrites the lines above
// it), bidirectional overrides (the text reads in another order than it is
// stored) and zero-width characters (two different strings look the same).
// Escape writes each such character as a visible escape (\x1b, \u202e), so
// that what the person reads is what the record holds, and counts them:
// whoever prints escaped text says so (Note), since a person who sees
// "\x1b[2K" must know it was not typed that way.
//
// Line escapes everything, newlines and tabs too, for a value that must stay
// on its line (a reason, an argument, a tool name); Block keeps newlines and
// tabs, for a document (stored content, a command's whole text output).
// Writer is Block as an io.Writer, for a command's output. JSON output needs
// none of this: encoding/json escapes C0 itself, and the reader of JSON is a
// program, which must get the exact bytes.
//
// Clip shortens a value on a character boundary and says how much it left
// out, never cutting inside a UTF-8 sequence.
package safetext
