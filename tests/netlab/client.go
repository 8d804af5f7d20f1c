package netlab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"time"
)

// Client calls one guest's agent.
type Client struct {
	Addr string // host:port
}

// callSlack is how long past a request's own timeout the client waits for the answer: the
// agent's reply of a slow command, under an emulated guest on a loaded machine.
const callSlack = 30 * time.Second

// Do sends req and returns the agent's answer. An error is a failed call (no agent, a broken
// connection, ctx done) or the agent's own Error; a command that ran and failed is not one.
func (c *Client) Do(ctx context.Context, req Request) (Response, error) {
	d := net.Dialer{Timeout: 5 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", c.Addr)
	if err != nil {
		return Response{}, fmt.Errorf("agent %s: %w", c.Addr, err)
	}
	defer conn.Close()
	deadline := time.Now().Add(req.timeout() + callSlack)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
	defer stop()
	if err := json.NewEncoder(conn).Encode(req); err != nil {
		return Response{}, fmt.Errorf("agent %s: send %s: %w", c.Addr, req.Op, err)
	}
	resp, err := readResponse(conn)
	if err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return Response{}, fmt.Errorf("agent %s: %s: %w", c.Addr, req.Op, err)
	}
	if resp.Error != "" {
		return resp, fmt.Errorf("agent %s: %s: %w", c.Addr, req.Op, errors.New(resp.Error))
	}
	return resp, nil
}

// Run runs argv in the guest within timeout.
func (c *Client) Run(ctx context.Context, timeout time.Duration, argv ...string) (Response, error) {
	return c.Do(ctx, Request{Op: OpRun, Argv: argv, Timeout: timeout})
}

// Ping returns the guest's boot ID and uptime.
func (c *Client) Ping(ctx context.Context) (Response, error) {
	return c.Do(ctx, Request{Op: OpPing, Timeout: 5 * time.Second})
}

// WaitUp pings the agent until it answers or ctx ends; it returns the answer.
func (c *Client) WaitUp(ctx context.Context) (Response, error) {
	for {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		resp, err := c.Ping(pctx)
		cancel()
		if err == nil {
			return resp, nil
		}
		select {
		case <-ctx.Done():
			return Response{}, fmt.Errorf("agent %s not up: %w (last: %v)", c.Addr, ctx.Err(), err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}
