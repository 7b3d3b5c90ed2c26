package cli

import (
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
)

// defaultMemoryLimit is the soft limit on the Go heap of the long-running
// verbs (serve, bench). pedigree's own memory is bounded by its caches, not
// by the size of the store, but with the runtime's default (collect when the
// heap has doubled) the garbage Badger's compactions make took the
// anonymous memory of a 1M-entry build to 700 MB; with this limit it stays
// near 260 MB at the same record rate (see docs/performance.md).
// Badger's tables are memory-mapped files, which the kernel reclaims; they
// are not counted here.
const defaultMemoryLimit = 256 << 20

// memoryLimit is the --memory-limit flag.
type memoryLimit struct{ value string }

func (m *memoryLimit) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&m.value, "memory-limit", "", "soft limit on the Go heap, as GOMEMLIMIT writes it (256MiB, 1GiB, or bytes); 0 turns it off (default $GOMEMLIMIT, else 256MiB)")
}

// apply sets the limit: the flag, else GOMEMLIMIT (which the runtime has
// already applied), else the default.
func (m *memoryLimit) apply(cmd *cobra.Command) error {
	if !cmd.Flags().Changed("memory-limit") {
		if _, set := os.LookupEnv("GOMEMLIMIT"); !set {
			debug.SetMemoryLimit(defaultMemoryLimit)
		}
		return nil
	}
	n, err := parseSize(m.value)
	if err != nil {
		return usagef("--memory-limit %q: %v", m.value, err)
	}
	if n == 0 {
		n = math.MaxInt64
	}
	debug.SetMemoryLimit(n)
	return nil
}

// parseSize reads a byte count in GOMEMLIMIT's notation: an integer with an
// optional B, KiB, MiB, GiB or TiB suffix.
func parseSize(s string) (int64, error) {
	units := []struct {
		suffix string
		shift  uint
	}{{"TiB", 40}, {"GiB", 30}, {"MiB", 20}, {"KiB", 10}, {"B", 0}}
	shift := uint(0)
	for _, u := range units {
		if rest, ok := strings.CutSuffix(s, u.suffix); ok {
			s, shift = rest, u.shift
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, errBadSize
	}
	if n > math.MaxInt64>>shift {
		return 0, errBadSize
	}
	return n << shift, nil
}

var errBadSize = usagef("want a size such as 256MiB, 1GiB or a number of bytes")
