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

// Power control is outside the guests: the launcher owns every guest's QEMU process. The driver
// asks for it through files in a directory of its control share (PowerDir in the driver, the
// same directory on the machine): NAME.req holds a PowerRequest, and the launcher answers with
// NAME.resp once done. Files, not a socket, because the control share is the one channel from
// a guest to the machine that needs no network; a request is rare, so polling costs nothing.

// Power actions.
const (
	// PowerKill kills the guest's QEMU with SIGKILL: a power cut, no shutdown. Its disk image
	// keeps what QEMU wrote to it (flushed or not: QEMU itself holds no dirty data for a raw
	// image); the guest's own page cache is lost.
	PowerKill = "kill"
	// PowerBoot boots the guest again (or for the first time), on the same disk image and the
	// same links. The answer comes once QEMU runs, before the guest is up: wait for its agent.
	PowerBoot = "boot"
)

// PowerDir is where the driver writes its requests, in its control share.
const PowerDir = "/labvm/power"

// PowerRequest is the content of a .req file.
type PowerRequest struct {
	Guest  string `json:"guest"`
	Action string `json:"action"`
}

// PowerReply is the content of a .resp file.
type PowerReply struct {
	Error string `json:"error,omitempty"`
	Boots int    `json:"boots"` // how many times the guest has been booted, this boot included
}

var powerSeq atomic.Int64

// RequestPower asks the launcher to carry out action on guest and waits for its answer.
func RequestPower(ctx context.Context, dir, guest, action string) (PowerReply, error) {
	name := fmt.Sprintf("%d-%d-%s-%s", time.Now().UnixNano(), powerSeq.Add(1), guest, action)
	b, _ := json.Marshal(PowerRequest{Guest: guest, Action: action})
	if err := writeAtomic(filepath.Join(dir, name+".req"), b); err != nil {
		return PowerReply{}, fmt.Errorf("power request: %w", err)
	}
	resp := filepath.Join(dir, name+".resp")
	for {
		b, err := os.ReadFile(resp)
		if err == nil {
			os.Remove(resp)
			var r PowerReply
			if err := json.Unmarshal(b, &r); err != nil {
				return PowerReply{}, fmt.Errorf("power reply %s: %w", resp, err)
			}
			if r.Error != "" {
				return r, fmt.Errorf("power %s %s: %s", action, guest, r.Error)
			}
			return r, nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return PowerReply{}, fmt.Errorf("power reply: %w", err)
		}
		select {
		case <-ctx.Done():
			os.Remove(filepath.Join(dir, name+".req"))
			return PowerReply{}, fmt.Errorf("power %s %s: no answer from the launcher: %w", action, guest, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// PowerCall is a request the launcher found.
type PowerCall struct {
	PowerRequest
	dir, name string
}

// PowerCalls lists the requests waiting in dir, oldest first, and takes them out of it.
func PowerCalls(dir string) ([]PowerCall, error) {
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
	var calls []PowerCall
	for _, n := range names {
		p := filepath.Join(dir, n+".req")
		b, err := os.ReadFile(p)
		os.Remove(p)
		c := PowerCall{dir: dir, name: n}
		if err == nil {
			err = json.Unmarshal(b, &c.PowerRequest)
		}
		if err != nil {
			_ = c.Reply(PowerReply{Error: fmt.Sprintf("bad request: %v", err)})
			continue
		}
		calls = append(calls, c)
	}
	return calls, nil
}

// Reply answers the call.
func (c PowerCall) Reply(r PowerReply) error {
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
