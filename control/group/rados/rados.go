//go:build linux && cgo && rbd

package rados

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ceph/go-ceph/rados"

	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/nvmeof-tgt/nvmeof-tgt/control/group"
	"github.com/nvmeof-tgt/nvmeof-tgt/limits"
)

// Supported reports whether Open can reach a cluster in this build.
const Supported = true

// Store is a group.Store in a RADOS pool: its own librados client.
type Store struct {
	conn *rados.Conn
	// An I/O context per concern: GetLastVersion is the version of an
	// ioctx's last operation, so the state's (whose version the
	// compare-and-swap guards) has one of its own, which nothing else
	// uses; the leases' heartbeats and the watch and notify have theirs.
	ioctx, leaseIO, notifyIO *rados.IOContext
	state                    string
	leases                   string
	log                      *slog.Logger

	// mu serializes the state's operations on ioctx, whose version
	// GetLastVersion reads.
	mu sync.Mutex

	wmu     sync.Mutex
	watcher *rados.Watcher
	stop    chan struct{}
}

// Open connects to the cluster as g.Client with g.CephConf and opens g.Pool.
// Connecting and every operation are bounded by limits.RBDConnectTimeout:
// an unreachable cluster is an error, not a hang.
func Open(g config.GatewayGroup, log *slog.Logger) (group.Store, error) {
	user := strings.TrimPrefix(g.Client, "client.")
	conn, err := rados.NewConnWithUser(user)
	if err != nil {
		return nil, fmt.Errorf("gateway group %s: create client %s: %w", g.Name, g.Client, err)
	}
	if err := conn.ReadConfigFile(g.CephConf); err != nil {
		conn.Shutdown()
		return nil, fmt.Errorf("gateway group %s: read %s: %w", g.Name, g.CephConf, err)
	}
	secs := strconv.Itoa(int(limits.RBDConnectTimeout / time.Second))
	for _, o := range []string{"client_mount_timeout", "rados_mon_op_timeout", "rados_osd_op_timeout"} {
		if err := conn.SetConfigOption(o, secs); err != nil {
			conn.Shutdown()
			return nil, fmt.Errorf("gateway group %s: set %s: %w", g.Name, o, err)
		}
	}
	if err := conn.Connect(); err != nil {
		conn.Shutdown()
		return nil, fmt.Errorf("gateway group %s: connect to the cluster of %s as client.%s: %w", g.Name, g.CephConf, user, err)
	}
	s := &Store{conn: conn, state: StateObject(g.Name), leases: LeasesObject(g.Name), log: log, stop: make(chan struct{})}
	for _, io := range []**rados.IOContext{&s.ioctx, &s.leaseIO, &s.notifyIO} {
		if *io, err = conn.OpenIOContext(g.Pool); err != nil {
			s.Close()
			if notFound(err) {
				return nil, fmt.Errorf("gateway group %s: pool %q: no such pool", g.Name, g.Pool)
			}
			return nil, fmt.Errorf("gateway group %s: pool %q: %w", g.Name, g.Pool, err)
		}
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return s, nil
}

// errno is a librados error's code, 0 if it has none; an operation's is
// that of the operation as a whole.
func errno(err error) int {
	var oe rados.OperationError
	if errors.As(err, &oe) && oe.OpError != nil {
		err = oe.OpError
	}
	var e interface{ ErrorCode() int }
	if errors.As(err, &e) {
		return -e.ErrorCode()
	}
	return 0
}

// notFound reports a missing object or pool (ENOENT).
func notFound(err error) bool { return errno(err) == int(syscall.ENOENT) }

// wrap maps librados' errors to group's: a client fenced by the group is
// refused with EBLOCKLISTED (ESHUTDOWN on Linux).
func wrap(err error) error {
	if errno(err) == int(syscall.ESHUTDOWN) {
		return fmt.Errorf("%w: %w", group.ErrBlocklisted, err)
	}
	return err
}

// omapPage bounds the keys one read operation returns (the OSD's
// osd_max_omap_entries_per_request is 131072).
const omapPage = 65536

func (s *Store) Read(ctx context.Context) (group.Object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := group.Object{Omap: map[string][]byte{}}
	after := ""
	size := 0
	for page := 0; ; page++ {
		op := rados.CreateReadOp()
		if page > 0 {
			// Every page of one version: another gateway's change
			// between two pages fails the read, which starts again.
			op.AssertVersion(o.Version)
		}
		var data []byte
		var rd *rados.ReadOpReadStep
		if page == 0 {
			data = make([]byte, 4096)
			rd = op.Read(0, data)
		}
		kv := op.GetOmapValues(after, "", omapPage)
		err := op.Operate(s.ioctx, s.state, rados.OperationNoFlag)
		if err != nil {
			op.Release()
			switch {
			case page == 0 && notFound(err):
				return group.Object{}, nil
			case page > 0 && (errno(err) == int(syscall.ERANGE) || errno(err) == int(syscall.EOVERFLOW) || notFound(err)):
				page, after, o, size = -1, "", group.Object{Omap: map[string][]byte{}}, 0
				continue
			}
			return group.Object{}, wrap(err)
		}
		if page == 0 {
			o.Data = data[:rd.BytesRead]
			v, err := s.ioctx.GetLastVersion()
			if err != nil {
				op.Release()
				return group.Object{}, err
			}
			o.Version = v
		}
		n := 0
		for {
			e, err := kv.Next()
			if err != nil {
				op.Release()
				return group.Object{}, err
			}
			if e == nil {
				break
			}
			// Bounded as it comes: whoever can write the pool could
			// otherwise make this gateway's memory the limit.
			size += len(e.Key) + len(e.Value)
			if len(o.Omap) >= limits.GroupStateKeys || size > limits.GroupStateBytes {
				op.Release()
				return group.Object{}, fmt.Errorf("%w: more than %d omap keys or %d bytes", group.ErrCorrupt, limits.GroupStateKeys, limits.GroupStateBytes)
			}
			o.Omap[e.Key] = e.Value
			after = e.Key
			n++
		}
		more := kv.More()
		op.Release()
		if !more || n == 0 {
			return o, nil
		}
	}
}

func (s *Store) Write(ctx context.Context, ver uint64, data []byte, set map[string][]byte, rm []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	op := rados.CreateWriteOp()
	defer op.Release()
	if ver == 0 {
		op.Create(rados.CreateExclusive)
		op.WriteFull(data)
	} else {
		op.AssertVersion(ver)
	}
	if len(set) > 0 {
		op.SetOmap(set)
	}
	if len(rm) > 0 {
		op.RmOmapKeys(rm)
	}
	err := op.Operate(s.ioctx, s.state, rados.OperationNoFlag)
	switch {
	case err == nil:
		return nil
	case errno(err) == int(syscall.EEXIST), errno(err) == int(syscall.ERANGE), errno(err) == int(syscall.EOVERFLOW),
		ver != 0 && notFound(err):
		// Created, changed or removed since it was read.
		return group.ErrConflict
	}
	return wrap(err)
}

func (s *Store) Notify(ctx context.Context, payload []byte, timeout time.Duration) (int, int, error) {
	acks, timeouts, err := s.notifyIO.NotifyWithTimeout(s.state, payload, timeout)
	if errno(err) == int(syscall.ETIMEDOUT) {
		err = nil // some watcher did not answer in time: timeouts says which
	}
	return len(acks), len(timeouts), wrap(err)
}

// Watch watches the state object; a watch the cluster drops (after a
// network cut, a timeout) is made again, the re-read under it being the
// safety net meanwhile.
func (s *Store) Watch(fn func(group.Notice)) (func(), error) {
	if err := s.watch(); err != nil {
		return nil, wrap(err)
	}
	self := rados.NotifierID(s.conn.GetInstanceID())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			s.wmu.Lock()
			w := s.watcher
			s.wmu.Unlock()
			if w == nil {
				if err := s.rewatch(); err != nil {
					return
				}
				continue
			}
			select {
			case <-s.stop:
				return
			case ne, ok := <-w.Events():
				if !ok {
					s.drop(w)
					continue
				}
				fn(group.Notice{Payload: ne.Data, Self: ne.NotifierID == self, Ack: func() { ne.Ack(nil) }})
			case err, ok := <-w.Errors():
				if ok {
					s.log.Warn("gateway group: the watch of the state failed; watching again", "err", err)
				}
				s.drop(w)
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(s.stop)
			<-done
			s.wmu.Lock()
			if s.watcher != nil {
				s.watcher.Delete()
				s.watcher = nil
			}
			s.wmu.Unlock()
		})
	}, nil
}

// Watching reports whether the watch holds now.
func (s *Store) Watching() bool {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.watcher != nil
}

func (s *Store) watch() error {
	// The OSD's default timeout (osd_client_watch_timeout, 30 s): a
	// shorter one than librados' pings (objecter_tick_interval, 5 s)
	// would drop live watches. A dead gateway's watch stays that long,
	// and notifications wait for it up to their own timeout meanwhile.
	w, err := s.notifyIO.Watch(s.state)
	if err != nil {
		return err
	}
	s.wmu.Lock()
	s.watcher = w
	s.wmu.Unlock()
	return nil
}

func (s *Store) drop(w *rados.Watcher) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.watcher == w {
		w.Delete()
		s.watcher = nil
	}
}

// rewatch watches again, once a second, until it can or Watch's stop.
func (s *Store) rewatch() error {
	for {
		if err := s.watch(); err == nil {
			return nil
		}
		select {
		case <-s.stop:
			return errors.New("stopped")
		case <-time.After(time.Second):
		}
	}
}

// lockName is gateway id's lease lock on the leases object.
func lockName(id int) string { return "gw." + strconv.Itoa(id) }

// lockRenew is LIBRADOS_LOCK_FLAG_RENEW: a lock this client holds for the
// same cookie is renewed rather than refused.
var lockRenew byte = 1

// Heartbeat takes or renews gateway id's exclusive lock on the leases
// object (cls_lock: the OSD records the holder's client and address, and
// drops the lock once hold has passed without renewal), then writes the
// record.
func (s *Store) Heartbeat(ctx context.Context, id int, incarnation string, hold time.Duration, record []byte) error {
	ret, err := s.leaseIO.LockExclusive(s.leases, lockName(id), incarnation, "nvmeof-tgt gateway lease", hold, &lockRenew)
	switch {
	case err != nil:
		return fmt.Errorf("lease lock: %w", wrap(err))
	case ret == -int(syscall.EBUSY) || ret == -int(syscall.EEXIST):
		who := "another client"
		if info, err := s.leaseIO.ListLockers(s.leases, lockName(id)); err == nil && info.NumLockers > 0 && len(info.Clients) > 0 && len(info.Addrs) > 0 && len(info.Cookies) > 0 {
			who = fmt.Sprintf("%s at %s for incarnation %q", info.Clients[0], info.Addrs[0], info.Cookies[0])
		}
		return fmt.Errorf("%w: held by %s", group.ErrIDTaken, who)
	}
	return wrap(s.leaseIO.SetOmap(s.leases, map[string][]byte{strconv.Itoa(id): record}))
}

// Leases reads the records of gateways 1..limits.GroupGateways by name,
// whatever else anyone wrote into the object's omap, and each one's lock
// holder.
func (s *Store) Leases(ctx context.Context) (map[int]group.Lease, error) {
	keys := make([]string, limits.GroupGateways)
	for i := range keys {
		keys[i] = strconv.Itoa(i + 1)
	}
	op := rados.CreateReadOp()
	defer op.Release()
	step := op.GetOmapValuesByKeys(keys)
	if err := op.Operate(s.leaseIO, s.leases, rados.OperationNoFlag); err != nil {
		if notFound(err) {
			return map[int]group.Lease{}, nil
		}
		return nil, wrap(err)
	}
	out := map[int]group.Lease{}
	for {
		kv, err := step.Next()
		if err != nil {
			return nil, err
		}
		if kv == nil {
			break
		}
		id, err := strconv.Atoi(kv.Key)
		if err != nil || id < 1 || id > limits.GroupGateways || len(kv.Value) > limits.GroupLeaseBytes {
			continue // not a lease (DecodeLease would refuse it anyway)
		}
		out[id] = group.Lease{Record: kv.Value}
	}
	for id, l := range out {
		// An error (a holder that does not fit ListLockers' buffers,
		// written to fail it) is no holder: the record does not count.
		info, err := s.leaseIO.ListLockers(s.leases, lockName(id))
		if err == nil && info.NumLockers == 1 && info.Exclusive && len(info.Cookies) == 1 && len(info.Addrs) == 1 {
			l.Holder = &group.Holder{Cookie: info.Cookies[0], Addr: ParseAddr(info.Addrs[0])}
			out[id] = l
		}
	}
	return out, nil
}

// blocklistFor is how long a fenced gateway's addresses stay blocklisted.
// Ceph's default, an hour, would let a gateway cut off for longer replay
// the writes librbd still holds once its network heals, over the newer
// data the survivors wrote; a returning gateway comes back as a new client
// (new addresses), and `ceph osd blocklist rm` lifts an entry by hand.
const blocklistFor = 365 * 24 * time.Hour

// Blocklist adds each address to the OSD map's blocklist (`ceph osd
// blocklist add`, pacific's spelling) for blocklistFor.
func (s *Store) Blocklist(ctx context.Context, addrs []string) error {
	for _, a := range addrs {
		cmd, _ := json.Marshal(map[string]any{"prefix": "osd blocklist", "blocklistop": "add", "addr": a,
			// A JSON real: the monitor takes an integer there as a missing field.
			"expire": json.Number(strconv.FormatFloat(blocklistFor.Seconds(), 'f', 1, 64))})
		if _, status, err := s.conn.MonCommand(cmd); err != nil {
			return fmt.Errorf("osd blocklist add %s: %w (%s)", a, wrap(err), status)
		}
	}
	// This client's next writes (the group's state) carry the map with the
	// blocklist.
	if err := s.conn.WaitForLatestOSDMap(); err != nil {
		return fmt.Errorf("wait for the OSD map with the blocklist: %w", wrap(err))
	}
	return nil
}

// Blocklisted reports whether the OSD map blocklists every one of addrs
// (`ceph osd blocklist ls`).
func (s *Store) Blocklisted(ctx context.Context, addrs []string) (bool, error) {
	if len(addrs) == 0 {
		return false, nil
	}
	cmd, _ := json.Marshal(map[string]string{"prefix": "osd blocklist ls", "format": "json"})
	out, status, err := s.conn.MonCommand(cmd)
	if err != nil {
		return false, fmt.Errorf("osd blocklist ls: %w (%s)", wrap(err), status)
	}
	// One JSON list of entries, then (pacific since 16.2.11) one of
	// ranges, which a gateway never adds.
	listed := map[string]bool{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var entries []struct {
			Addr string `json:"addr"`
		}
		if err := dec.Decode(&entries); err != nil {
			return false, fmt.Errorf("osd blocklist ls: %w", err)
		}
		for _, e := range entries {
			listed[e.Addr] = true
		}
	}
	for _, a := range addrs {
		if !listed[a] {
			return false, nil
		}
	}
	return true, nil
}

// Addrs are the client's addresses, as `ceph osd blocklist add` takes them.
func (s *Store) Addrs() []string {
	a, err := s.conn.GetAddrs()
	if err != nil {
		return nil
	}
	return ParseAddrs(a)
}

// Close disconnects.
func (s *Store) Close() {
	for _, io := range []*rados.IOContext{s.ioctx, s.leaseIO, s.notifyIO} {
		if io != nil {
			io.Destroy()
		}
	}
	s.conn.Shutdown()
}
