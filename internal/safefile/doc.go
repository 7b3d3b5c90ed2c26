// Package safefile is the one door through which pedigree writes, renames
// and removes its files (the data directory, the keys directory, the hook's
// state, the gateway's configuration, sockets, serve.json, checkpoints),
// so that nothing planted in a directory pedigree writes to can make it
// write, truncate or remove a file somewhere else.
//
// Every function takes a base directory, which is opened as given (the
// operator chose it, symlinks in its path included), and a name relative to
// it, every component of which is reached with openat(2) and O_NOFOLLOW:
// a symbolic link anywhere under the base is refused, never followed.
// A file is written to a new temporary (O_CREAT|O_EXCL, a random name in
// the same directory), synced, and renamed over the name with renameat(2),
// which replaces whatever the name was (a planted link included) without
// writing through it. A file is removed only when it is what pedigree
// made: of the expected kind (a regular file, or a socket), owned by this
// user, with one link; anything else stays, and the caller is told.
package safefile
