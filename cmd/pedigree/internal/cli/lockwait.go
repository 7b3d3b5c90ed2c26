package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/pedigree-ai/pedigree"
)

// DefaultLockWait is how long a verb waits for a data directory that another
// pedigree process holds (Badger lets one process open it) before it gives up.
const DefaultLockWait = 5 * time.Second

// lockWaitNotice is how long a wait lasts before the verb says it is
// waiting: a server that is starting holds the directory for a moment,
// and a line about it then reads like an error.
const lockWaitNotice = time.Second

// lockBackoff bounds the pause between two attempts to take the directory.
const (
	lockBackoffMin = 10 * time.Millisecond
	lockBackoffMax = 250 * time.Millisecond
)

// errStillLocked is the error a verb ends with when the directory stayed
// held for the whole wait; its hint says what to do about it.
type errStillLocked struct {
	dir    string
	waited time.Duration
	err    error
	// serving: the verb is 'serve', which needs the directory alone.
	serving bool
}

func (e errStillLocked) Error() string { return fmt.Sprintf("%v (waited %v)", e.err, e.waited) }
func (e errStillLocked) Unwrap() error { return e.err }

func (e errStillLocked) hint() string {
	if e.serving {
		return "'pedigree serve' needs the data directory alone: stop the command that holds it, or give it longer with --lock-wait"
	}
	return fmt.Sprintf("only one process can open a data directory: to run several commands at once, "+
		"start 'pedigree serve --dir %s' and they will share it through its socket; "+
		"or wait for the other command to finish, or give it longer with --lock-wait", e.dir)
}

// waitForDirectory calls attempt until it returns anything but
// pedigree.ErrLocked, backing off between attempts, for at most a.lockWait.
// It says once on stderr that it is waiting when the wait has lasted
// lockWaitNotice, so that a long pause is never silent and a short one
// prints nothing. attempt is retried whole, so it may also look for a server that
// has started meanwhile.
func (a *app) waitForDirectory(ctx context.Context, attempt func() error) error {
	start := time.Now()
	pause := lockBackoffMin
	said := false
	for {
		err := attempt()
		if !errors.Is(err, pedigree.ErrLocked) {
			return err
		}
		waited := time.Since(start)
		if waited >= a.lockWait {
			return errStillLocked{dir: a.dir, waited: a.lockWait, err: err}
		}
		if !said && waited >= lockWaitNotice {
			fmt.Fprintf(a.errw, "pedigree: %s is in use by another pedigree process; waiting up to %v for it\n", a.dir, a.lockWait)
			said = true
		}
		t := time.NewTimer(min(pause, a.lockWait-waited))
		select {
		case <-ctx.Done():
			t.Stop()
			return errors.Join(err, ctx.Err())
		case <-t.C:
		}
		pause = min(2*pause, lockBackoffMax)
	}
}
