//go:build linux && cgo && rbd

package blockdev

import (
	"errors"
	"fmt"
)

// heldConns are the cluster connections open now, each held (release it)
// so that its last image closing meanwhile cannot close it under the
// caller. One still connecting is left out: it has neither an address to
// record yet nor an old OSD map to refresh.
func heldConns() []*rbdConn {
	rbdConns.mu.Lock()
	defer rbdConns.mu.Unlock()
	var conns []*rbdConn
	for _, c := range rbdConns.m {
		select {
		case <-c.ready:
			if c.err == nil && c.refs > 0 {
				c.refs++
				conns = append(conns, c)
			}
		default:
		}
	}
	return conns
}

// RBDClientAddrs are the addresses of the cluster connections open now
// (rados_getaddrs), one string per connection: a gateway group records
// them in the gateway's lease, so that fencing the gateway blocklists its
// data path as well as its group client.
func RBDClientAddrs() []string {
	var out []string
	for _, c := range heldConns() {
		if a, err := c.conn.Addrs(); err == nil && a != "" {
			out = append(out, a)
		}
		c.release()
	}
	return out
}

// RBDWaitForLatestOSDMap waits until every cluster connection open now has
// the newest OSD map (a gateway group runs it after fencing another
// gateway, before serving that gateway's namespaces).
func RBDWaitForLatestOSDMap() error {
	var errs []error
	for _, c := range heldConns() {
		if err := c.conn.WaitForLatestOSDMap(); err != nil {
			errs = append(errs, fmt.Errorf("rbd client: wait for the newest OSD map: %w", err))
		}
		c.release()
	}
	return errors.Join(errs...)
}
