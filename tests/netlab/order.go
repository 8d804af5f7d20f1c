package netlab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"time"
)

// Power and carrier are outside the guests: the launcher owns every guest's QEMU process and
// its NICs. The driver sends it orders through files in a directory of its control share
// (OrderDir in the driver, the same directory on the machine): NAME.req holds an Order, and
// the launcher answers with NAME.resp once done. Files, not a socket, because the control share
// is the one channel from a guest to the machine that needs no network; an order is rare, so
// polling costs nothing.

// Actions of an Order.
const (
	// PowerKill kills the guest's QEMU with SIGKILL: a power cut, no shutdown. Its disk image
	// keeps what QEMU wrote to it (flushed or not: QEMU itself holds no dirty data for a raw
	// image); the guest's own page cache is lost.
	PowerKill = "kill"
	// PowerBoot boots the guest again (or for the first time), on the same disk image and the
	// same links. The answer comes once QEMU runs, before the guest is up: wait for its agent.
	PowerBoot = "boot"
	// CarrierOff and CarrierOn take the carrier of the guest's NIC on Link away and give it
	// back (QEMU's set_link): the guest sees NO-CARRIER and its rxe port go down, and nothing
	// passes that NIC either way, as with a pulled cable; the netdev stays up, its addresses
	// and routes with it. A boot starts with every carrier on.
	CarrierOff = "carrier-off"
	CarrierOn  = "carrier-on"
)

// OrderDir is where the driver writes its orders, in its control share.
const OrderDir = "/labvm/orders"

// Order is the content of a .req file.
type Order struct {
	Guest  string `json:"guest"`
	Action string `json:"action"`
	Link   string `json:"link,omitempty"` // CarrierOff, CarrierOn
}

// Reply is the content of a .resp file.
type Reply struct {
	Error string `json:"error,omitempty"`
	Boots int    `json:"boots"` // how many times the guest has been booted, this boot included
}

var orderSeq atomic.Int64

// RequestPower asks the launcher to carry out action (PowerKill, PowerBoot) on guest and waits
// for its answer.
func RequestPower(ctx context.Context, dir, guest, action string) (Reply, error) {
	return request(ctx, dir, Order{Guest: guest, Action: action})
}

// RequestCarrier asks the launcher to set the carrier of guest's NIC on link.
func RequestCarrier(ctx context.Context, dir, guest, link string, on bool) error {
	o := Order{Guest: guest, Action: CarrierOff, Link: link}
	if on {
		o.Action = CarrierOn
	}
	_, err := request(ctx, dir, o)
	return err
}

func request(ctx context.Context, dir string, o Order) (Reply, error) {
	guest, action := o.Guest, o.Action
	name := fmt.Sprintf("%d-%d-%s-%s", time.Now().UnixNano(), orderSeq.Add(1), guest, action)
	b, _ := json.Marshal(o)
	if err := writeAtomic(filepath.Join(dir, name+".req"), b); err != nil {
		return Reply{}, fmt.Errorf("order %s %s: %w", action, guest, err)
	}
	resp := filepath.Join(dir, name+".resp")
	for {
		b, err := os.ReadFile(resp)
		if err == nil {
			os.Remove(resp)
			var r Reply
			if err := json.Unmarshal(b, &r); err != nil {
				return Reply{}, fmt.Errorf("answer %s: %w", resp, err)
			}
			if r.Error != "" {
				return r, fmt.Errorf("%s %s: %s", action, guest, r.Error)
			}
			return r, nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return Reply{}, fmt.Errorf("answer to %s %s: %w", action, guest, err)
		}
		select {
		case <-ctx.Done():
			os.Remove(filepath.Join(dir, name+".req"))
			return Reply{}, fmt.Errorf("%s %s: no answer from the launcher: %w", action, guest, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Call is an order the launcher found.
type Call struct {
	Order
	dir, name string
}

// Orders lists the orders waiting in dir, oldest first, and takes them out of it.
func Orders(dir string) ([]Call, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range ents {
		if n, ok := strings.CutSuffix(e.Name(), ".req"); ok {
			names = append(names, n)
		}
	}
	sort.Strings(names) // they begin with the time they were made
	var calls []Call
	for _, n := range names {
		p := filepath.Join(dir, n+".req")
		b, err := os.ReadFile(p)
		os.Remove(p)
		c := Call{dir: dir, name: n}
		if err == nil {
			err = json.Unmarshal(b, &c.Order)
		}
		if err != nil {
			_ = c.Reply(Reply{Error: fmt.Sprintf("bad request: %v", err)})
			continue
		}
		calls = append(calls, c)
	}
	return calls, nil
}

// Reply answers the call.
func (c Call) Reply(r Reply) error {
	b, _ := json.Marshal(r)
	return writeAtomic(filepath.Join(c.dir, c.name+".resp"), b)
}

// writeAtomic writes b to path through a temporary file and a rename, so that the reader (on
// the other side of 9p) never sees half of it.
func writeAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
