package nvme

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// The NQN rule. A name is usable when the Linux host (nvme-fabrics) and
// kernel nvmet would take it: not empty, at most MaxNQNLength bytes (the
// host refuses longer ones, nvmet truncates them), no NUL (the wire field
// is NUL padded), and a name nvmet can make a configfs directory of (its
// subsystems and hosts are directories): no '/', not "." or "..". The
// management API needs the last too, since a name is a URL path segment
// there (docs/api.md). The spec's forms (NVMe base §4.5) are only recommended:
// tutorials and blktests use names like "testnqn", so IsSpecNQN is for a
// warning, not a refusal.

// ErrInvalidNQN is wrapped by every error of CheckNQN.
var ErrInvalidNQN = errors.New("invalid NQN")

// ErrReservedNQN is wrapped by CheckSubsystemNQN's error for DiscoveryNQN.
var ErrReservedNQN = errors.New("reserved NQN")

// CheckNQN reports whether s is usable as a subsystem or host NQN.
func CheckNQN(s string) error {
	switch {
	case s == "":
		return fmt.Errorf("%w: empty", ErrInvalidNQN)
	case len(s) > MaxNQNLength:
		return fmt.Errorf("%w: %d bytes, more than %d", ErrInvalidNQN, len(s), MaxNQNLength)
	case strings.IndexByte(s, 0) >= 0:
		return fmt.Errorf("%w: %q has a NUL byte", ErrInvalidNQN, s)
	case strings.IndexByte(s, '/') >= 0:
		return fmt.Errorf("%w: %q has a '/'", ErrInvalidNQN, s)
	case s == "." || s == "..":
		return fmt.Errorf("%w: %q names a directory", ErrInvalidNQN, s)
	}
	return nil
}

// CheckSubsystemNQN is CheckNQN, and refuses DiscoveryNQN, which only the
// discovery subsystem has.
func CheckSubsystemNQN(s string) error {
	if err := CheckNQN(s); err != nil {
		return err
	}
	if s == DiscoveryNQN {
		return fmt.Errorf("%w: %q is the discovery subsystem's", ErrReservedNQN, s)
	}
	return nil
}

// UUIDNQNPrefix starts the second NQN form, followed by a UUID.
const UUIDNQNPrefix = "nqn.2014-08.org.nvmexpress:uuid:"

var (
	// nqn.yyyy-mm.reverse-domain:name
	specNQNRE = regexp.MustCompile(`^nqn\.[0-9]{4}-(0[1-9]|1[0-2])\.` +
		`[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*:.+$`)
	uuidRE = regexp.MustCompile(`^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$`)
)

// IsSpecNQN reports whether s has one of the forms of NVMe base §4.5:
// nqn.yyyy-mm.reverse-domain:name, UUIDNQNPrefix followed by a UUID, or
// DiscoveryNQN itself.
func IsSpecNQN(s string) bool {
	if u, ok := strings.CutPrefix(s, UUIDNQNPrefix); ok {
		return uuidRE.MatchString(u)
	}
	return s == DiscoveryNQN || specNQNRE.MatchString(s)
}
