package group

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/nvmeof-tgt/nvmeof-tgt/limits"
)

// Read reads and decodes the group's state.
func Read(ctx context.Context, st Store) (*State, error) {
	o, err := st.Read(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the group's state: %w", err)
	}
	return Decode(o)
}

// Commit writes next, a change of cur (as Read returned it), as version
// cur.Version+1, in cur's epoch (a new one when it creates the object),
// if the object is still what cur was read from:
// ErrConflict otherwise, and nothing is written.
func Commit(ctx context.Context, st Store, cur, next *State) error {
	next.Version = cur.Version + 1
	// The object's epoch: new with the object, the same ever after.
	next.Epoch = cur.Epoch
	if cur.object == 0 || cur.Epoch == "" {
		// A new object, or one written before epochs: it gets one.
		next.Epoch = NewEpoch()
	}
	set, rm := Diff(cur, next)
	if cur.object == 0 {
		// Creating the object: all of next (cur may hold content, as
		// Recreate gives it), and nothing to remove.
		set, rm = next.Omap(), nil
	}
	if err := st.Write(ctx, cur.object, []byte(Header), set, rm); err != nil {
		if errors.Is(err, ErrConflict) {
			return err
		}
		return fmt.Errorf("write the group's state: %w", err)
	}
	// What the object's version is now, only a new Read tells.
	next.object = 0
	return nil
}

// Update makes a change on the latest state: edit changes a copy and
// reports whether it changed anything (false commits nothing). A commit
// that loses to another gateway's change is made again on the newer state,
// at most tries times in all; then ErrConflict. It returns the state as
// committed (or as read, when edit changed nothing).
func Update(ctx context.Context, st Store, tries int, edit func(*State) (bool, error)) (*State, error) {
	for range tries {
		cur, err := Read(ctx, st)
		if err != nil {
			return nil, err
		}
		next := cur.Clone()
		changed, err := edit(next)
		if err != nil || !changed {
			return cur, err
		}
		switch err := Commit(ctx, st, cur, next); {
		case errors.Is(err, ErrConflict):
			continue
		case err != nil:
			return nil, err
		}
		return next, nil
	}
	return nil, ConflictError(tries)
}

// ConflictError is ErrConflict after tries attempts.
func ConflictError(tries int) error {
	return fmt.Errorf("%w %d times in a row (other gateways are changing it): try again", ErrConflict, tries)
}

// Notification is what a gateway tells the others after a change.
type Notification struct {
	// Version is the state's version after the change.
	Version uint64 `json:"version"`
	// From is the gateway that made it.
	From int `json:"from"`
	// Kind is KindConfig or KindReservation.
	Kind string `json:"kind"`
}

// Kinds of change.
const (
	KindConfig      = "config"
	KindReservation = "reservation"
)

// Encode is the notification's payload.
func (n Notification) Encode() []byte { return mustJSON(n) }

// DecodeNotification reads a payload; a malformed one is an error (the
// watcher then reads the state anyway).
func DecodeNotification(b []byte) (Notification, error) {
	var n Notification
	err := strictJSON(b, &n)
	return n, err
}

// LeaseRecord is a gateway's lease: what it writes at every heartbeat.
type LeaseRecord struct {
	// Incarnation is new at each start of the gateway.
	Incarnation string `json:"incarnation"`
	// Seq counts its heartbeats: the others see it change.
	Seq uint64 `json:"seq"`
	// Addrs are its RADOS clients' addresses, which fencing blocklists.
	Addrs []string `json:"addrs"`
	// Stopped says it stopped cleanly, its clients closed: the others
	// take its group over at once, with nothing to fence.
	Stopped bool `json:"stopped,omitempty"`
	// Idle says it serves nothing though it holds its lease: it cannot
	// read the group's state, its namespaces refuse I/O and none runs any
	// more, so the others serve its group meanwhile, with nothing to
	// fence.
	Idle bool `json:"idle,omitempty"`
}

// Encode is the record as the leases object holds it.
func (r LeaseRecord) Encode() []byte { return mustJSON(r) }

// DecodeLease reads a lease record. Anyone able to write the pool can
// write one, so it is bounded: limits.GroupLeaseBytes in all, at most
// limits.GroupLeaseAddrs addresses, each a client address as Blocklist
// takes it.
func DecodeLease(b []byte) (LeaseRecord, error) {
	var r LeaseRecord
	if len(b) > limits.GroupLeaseBytes {
		return r, fmt.Errorf("lease record: %d bytes, more than %d", len(b), limits.GroupLeaseBytes)
	}
	if err := strictJSON(b, &r); err != nil {
		return r, fmt.Errorf("lease record: %w", err)
	}
	if r.Incarnation == "" || len(r.Incarnation) > 64 {
		return r, errors.New("lease record: no incarnation, or one of more than 64 bytes")
	}
	if len(r.Addrs) > limits.GroupLeaseAddrs {
		return r, fmt.Errorf("lease record: %d addresses, more than %d", len(r.Addrs), limits.GroupLeaseAddrs)
	}
	for _, a := range r.Addrs {
		if _, err := AddrHost(a); err != nil {
			return r, fmt.Errorf("lease record: %w", err)
		}
	}
	return r, nil
}

// AddrHost is the host part of a client address as Blocklist takes it,
// "IP:PORT/NONCE" ("[IPv6]:PORT/NONCE"): the machine the client runs on.
func AddrHost(a string) (string, error) {
	hostPort, nonce, ok := strings.Cut(a, "/")
	host, _, err := net.SplitHostPort(hostPort)
	// Nonce 0 is every client of the address (OSDMap::is_blocklisted):
	// no gateway's client has it, and a fence must never name it.
	if !ok || err != nil || net.ParseIP(host) == nil || nonce == "" || strings.Trim(nonce, "0123456789") != "" || strings.Trim(nonce, "0") == "" || len(a) > 64 {
		return "", fmt.Errorf("%q is not a client address (IP:PORT/NONCE)", prefix([]byte(a)))
	}
	return net.ParseIP(host).String(), nil
}

// marshal is json.Marshal for tests' fixtures.
var marshal = json.Marshal
