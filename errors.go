package pedigree

import (
	"errors"

	"github.com/pedigree-ai/pedigree/internal/store"
	"github.com/pedigree-ai/pedigree/registry"
)

// The store's errors, as a library caller tests for them with errors.Is.
var (
	// ErrLocked: another process holds the data directory (a running
	// `pedigree serve`, or another engine).
	ErrLocked = store.ErrLocked
	// ErrNotInitialized: the directory holds no pedigree store yet.
	ErrNotInitialized = store.ErrNotInitialized
	// ErrExists: Init was asked to create a store that is already there.
	ErrExists = store.ErrExists
	// ErrDiskFull: the data directory's filesystem is nearly full; the write
	// was refused with nothing stored.
	ErrDiskFull = store.ErrDiskFull
	// ErrClosed: the engine is closed.
	ErrClosed = store.ErrClosed
)

// ErrTampered is what every "the evidence is bad" error wraps (a registry
// changed since freeze, a freeze record deleted or swapped); see
// registry.ErrTampered. An error that does not wrap it means the engine
// could not check.
var ErrTampered = registry.ErrTampered

// ErrFleet: the node cannot join the fleet as asked.
var ErrFleet = errors.New("fleet")
