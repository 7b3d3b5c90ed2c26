package registry

import (
	"encoding/json"
	"fmt"
)

// Tier is how far a principal is trusted. The zero value is not a tier.
// Tiers are ordered most trusted first, so "the least trusted of" is Max.
type Tier uint8

const (
	Internal   Tier = iota + 1 // the operator's own agents and services
	User                       // the humans the agent works for
	Unverified                 // known parties whose content is not vouched for
	External                   // anything an outside party could have written
)

var tierNames = [...]string{"", "internal", "user", "unverified", "external"}

// ParseTier reads a tier name.
func ParseTier(s string) (Tier, error) {
	for i, n := range tierNames {
		if i > 0 && n == s {
			return Tier(i), nil
		}
	}
	return 0, fmt.Errorf("%w %q: want internal, user, unverified or external", ErrBadTier, s)
}

func (t Tier) String() string {
	if t < Internal || t > External {
		return fmt.Sprintf("tier(%d)", uint8(t))
	}
	return tierNames[t]
}

// Valid reports whether t is one of the four tiers.
func (t Tier) Valid() bool { return t >= Internal && t <= External }

// Trusted reports whether content at this tier may justify a sensitive action.
func (t Tier) Trusted() bool { return t == Internal || t == User }

// Max is the least trusted of a and b.
func Max(a, b Tier) Tier { return max(a, b) }

func (t Tier) MarshalJSON() ([]byte, error) {
	if !t.Valid() {
		return nil, fmt.Errorf("%w: %d", ErrBadTier, uint8(t))
	}
	return json.Marshal(t.String())
}

func (t *Tier) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := ParseTier(s)
	if err != nil {
		return err
	}
	*t = v
	return nil
}
