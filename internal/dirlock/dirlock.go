// Package dirlock gives a directory to one process at a time: an
// exclusive flock on a lock file in it, which the kernel releases when the
// process ends however it ends (a kill -9 leaves no stale lock). The file
// names its holder, so that a process refused can say which one has it.
package dirlock

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Name is the lock file in the directory.
const Name = "lock"

// ErrHeld is returned, wrapped with the holder, when another process (or
// another Lock of this one) holds the directory.
var ErrHeld = errors.New("in use by another process")

// Holder is what the lock file says of the process that holds it.
type Holder struct {
	PID    int    `json:"pid"`
	Config string `json:"config,omitempty"` // its configuration file
}

func (h Holder) String() string {
	if h.PID == 0 {
		return "holder not recorded"
	}
	s := fmt.Sprintf("pid %d", h.PID)
	if h.Config != "" {
		s += ", config " + h.Config
	}
	return s
}

// Lock is a held directory.
type Lock struct {
	f *os.File
}

// Acquire takes dir (made if missing, mode 0700) for me, or fails at once
// with ErrHeld naming the holder.
func Acquire(dir string, me Holder) (*Lock, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, Name)
	// Never truncated at open nor removed: the file another process
	// holds must keep naming it, and a lock file removed while a
	// process opens it would let two hold different inodes.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%s %w (%s)", dir, ErrHeld, readHolder(f))
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	data, err := json.Marshal(me)
	if err == nil {
		err = f.Truncate(0)
	}
	if err == nil {
		_, err = f.WriteAt(append(data, '\n'), 0)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	return &Lock{f: f}, nil
}

// readHolder reads what the holder wrote; a holder between its lock and
// its write has written nothing yet.
func readHolder(f *os.File) Holder {
	var h Holder
	data, err := io.ReadAll(io.LimitReader(f, 4096))
	if err == nil {
		json.Unmarshal(data, &h) // a zero Holder says it is not known
	}
	return h
}

// Close lets the directory go. The file stays (see Acquire), emptied.
func (l *Lock) Close() error {
	if l == nil || l.f == nil {
		return nil
	}
	l.f.Truncate(0)
	err := l.f.Close() // releases the flock
	l.f = nil
	return err
}
