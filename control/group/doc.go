// Package group is the logic of a gateway group, apart from RADOS: the
// group's state and its encoding, the compare-and-swap of a change, the
// gateways' leases, and who owns which ANA group. Store is what it needs
// of RADOS; MemStore keeps it in memory for tests, and package
// control/group/rados (build tag rbd) keeps it in a pool.
//
// The group's state is one object, nvmeof-tgt.<name>.state. Its data is
// the format's header (Header) and its omap holds one key per thing:
//
//	version                      the state's version, decimal: one more at each change
//	epoch                        the object's, random, written when it is created
//	subsystem/<nqn>              a subsystem (JSON)
//	namespace/<nqn>/<nsid>       one of its namespaces
//	host/<nqn>/<host nqn>        a host allowed to it, with its key files' paths, never a secret
//	listener/<gateway>/<port id> a gateway's port, for status and discovery
//	resv/<nqn>/<nsid>            a namespace's persistent reservations
//
// NQNs hold no '/', so the keys split unambiguously. A change reads the
// object, makes the new state and writes the omap keys that differ,
// guarded by the object's version (Commit): a change made meanwhile by
// another gateway fails it with ErrConflict, and the change is made again
// on the newer state. Then the writer notifies the object's watchers.
//
// Leases live in a second object, nvmeof-tgt.<name>.leases, so that
// heartbeats do not bump the state's version: one omap key per gateway
// (its id) whose record changes at every heartbeat. A Tracker times them
// with the observer's own clock, so that no two gateways' clocks are
// compared.
package group
