package netlab

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The agent runs commands in its guest for the driver: one JSON Request per TCP connection, one
// JSON Response back. A connection per call keeps a command that hangs (or a guest that lost
// power) from holding up any other, and needs no framing beyond the JSON value itself.

// Operations of a Request.
const (
	OpPing   = "ping"   // the guest's boot ID and uptime
	OpRun    = "run"    // run Argv to completion, within Timeout
	OpStart  = "start"  // start Argv in the background; with Notify, wait for READY=1
	OpSignal = "signal" // send Signal to a process Start started
	OpWait   = "wait"   // wait up to Timeout for a process Start started to exit
)

// Limits of a call.
const (
	DefaultTimeout = 60 * time.Second
	maxTimeout     = 30 * time.Minute
	maxOutput      = 16 << 20 // of stdout and of stderr, each
	maxRequest     = 1 << 20
	waitDelay      = 5 * time.Second // for pipes held by a command's orphans
)

// Request is one call to the agent.
type Request struct {
	Op   string   `json:"op"`
	Argv []string `json:"argv,omitempty"`
	Env  []string `json:"env,omitempty"` // KEY=VALUE, added to the agent's environment
	Dir  string   `json:"dir,omitempty"`
	// Stdin is Run's standard input (none if nil).
	Stdin []byte `json:"stdin,omitempty"`
	// Timeout bounds Run (the command's process group is killed past it), Start's wait for
	// READY=1, and Wait; 0 is DefaultTimeout.
	Timeout time.Duration `json:"timeout,omitempty"`
	// Log is the file Start appends the process's output to (and its notify messages).
	Log string `json:"log,omitempty"`
	// Notify makes Start give the process a NOTIFY_SOCKET (the systemd notify protocol) and
	// answer once it sends READY=1, exits, or Timeout passes.
	Notify bool `json:"notify,omitempty"`
	PID    int  `json:"pid,omitempty"`    // Signal, Wait
	Signal int  `json:"signal,omitempty"` // Signal
}

// Response is the agent's answer. Error is set when the agent could not do what was asked
// (a bad request, a command that could not start); a command that ran and failed is not an
// Error but an Exit status.
type Response struct {
	Error string `json:"error,omitempty"`
	// Run and Wait: how the command ended. Exit is -1 if a signal ended it.
	Exit     int    `json:"exit"`
	Signal   int    `json:"signal,omitempty"`
	TimedOut bool   `json:"timed_out,omitempty"`
	Stdout   []byte `json:"stdout,omitempty"`
	Stderr   []byte `json:"stderr,omitempty"`
	// Start: the process, and whether it sent READY=1. Wait: whether it has exited.
	PID    int  `json:"pid,omitempty"`
	Ready  bool `json:"ready,omitempty"`
	Exited bool `json:"exited,omitempty"`
	// Ping.
	BootID string        `json:"boot_id,omitempty"`
	Uptime time.Duration `json:"uptime,omitempty"`
	Took   time.Duration `json:"took"`
}

func (r Request) timeout() time.Duration {
	switch {
	case r.Timeout <= 0:
		return DefaultTimeout
	case r.Timeout > maxTimeout:
		return maxTimeout
	}
	return r.Timeout
}

// Agent serves requests. Its zero value is ready to use.
type Agent struct {
	Log *slog.Logger // nil: discard

	mu    sync.Mutex
	procs map[int]*proc // what Start started, until Wait has seen it exit
}

// proc is a process Start started.
type proc struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once cmd has been waited for
	logf   *os.File
}

func (a *Agent) log() *slog.Logger {
	if a.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return a.Log
}

// Serve answers the connections ln accepts until ctx ends or ln fails.
func (a *Agent) Serve(ctx context.Context, ln net.Listener) error {
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("accept: %w", err)
		}
		go a.serveConn(conn)
	}
}

func (a *Agent) serveConn(conn net.Conn) {
	defer conn.Close()
	var req Request
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	if err := json.NewDecoder(io.LimitReader(conn, maxRequest)).Decode(&req); err != nil {
		a.reply(conn, Response{Error: fmt.Sprintf("decode request: %v", err)})
		return
	}
	_ = conn.SetReadDeadline(time.Time{})
	start := time.Now()
	resp := a.Do(req)
	resp.Took = time.Since(start)
	a.log().Debug("agent call", "op", req.Op, "argv", req.Argv, "exit", resp.Exit, "error", resp.Error, "took", resp.Took)
	a.reply(conn, resp)
}

func (a *Agent) reply(conn net.Conn, resp Response) {
	_ = conn.SetWriteDeadline(time.Now().Add(30 * time.Second))
	if err := json.NewEncoder(conn).Encode(resp); err != nil {
		a.log().Warn("agent reply", "error", err)
	}
}

// Do carries out one request.
func (a *Agent) Do(req Request) Response {
	switch req.Op {
	case OpPing:
		return ping()
	case OpRun:
		return a.run(req)
	case OpStart:
		return a.start(req)
	case OpSignal:
		return a.signal(req)
	case OpWait:
		return a.wait(req)
	}
	return Response{Error: fmt.Sprintf("unknown op %q", req.Op)}
}

func ping() Response {
	id, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return Response{Error: fmt.Sprintf("boot id: %v", err)}
	}
	var up float64
	if b, err := os.ReadFile("/proc/uptime"); err == nil {
		_, _ = fmt.Sscanf(string(b), "%f", &up)
	}
	return Response{BootID: strings.TrimSpace(string(id)), Uptime: time.Duration(up * float64(time.Second))}
}

func command(req Request) (*exec.Cmd, error) {
	if len(req.Argv) == 0 || req.Argv[0] == "" {
		return nil, errors.New("no command")
	}
	cmd := exec.Command(req.Argv[0], req.Argv[1:]...)
	cmd.Env = append(os.Environ(), req.Env...)
	cmd.Dir = req.Dir
	// Its own process group: a timeout kills what a shell command started too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd, nil
}

func (a *Agent) run(req Request) Response {
	cmd, err := command(req)
	if err != nil {
		return Response{Error: err.Error()}
	}
	stdout, stderr := &capped{max: maxOutput}, &capped{max: maxOutput}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if req.Stdin != nil {
		cmd.Stdin = bytes.NewReader(req.Stdin)
	}
	cmd.WaitDelay = waitDelay
	if err := cmd.Start(); err != nil {
		return Response{Error: fmt.Sprintf("start %s: %v", req.Argv[0], err)}
	}
	var timedOut bool
	var tmu sync.Mutex
	timer := time.AfterFunc(req.timeout(), func() {
		tmu.Lock()
		timedOut = true
		tmu.Unlock()
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	})
	_ = cmd.Wait()
	timer.Stop()
	tmu.Lock()
	defer tmu.Unlock()
	resp := exitOf(cmd.ProcessState)
	resp.TimedOut = timedOut
	resp.Stdout, resp.Stderr = stdout.Bytes(), stderr.Bytes()
	return resp
}

// exitOf is how a process ended.
func exitOf(ps *os.ProcessState) Response {
	r := Response{Exit: ps.ExitCode(), Exited: true}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		r.Signal = int(ws.Signal())
	}
	return r
}

func (a *Agent) start(req Request) Response {
	cmd, err := command(req)
	if err != nil {
		return Response{Error: err.Error()}
	}
	logName := req.Log
	if logName == "" {
		logName = os.DevNull
	}
	logf, err := os.OpenFile(logName, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return Response{Error: fmt.Sprintf("log: %v", err)}
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	var notify *net.UnixConn
	if req.Notify {
		dir, err := os.MkdirTemp("", "agent-notify-")
		if err != nil {
			logf.Close()
			return Response{Error: fmt.Sprintf("notify socket: %v", err)}
		}
		defer os.RemoveAll(dir) // the socket is bound: removing its name does not close it
		sock := filepath.Join(dir, "notify.sock")
		notify, err = net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
		if err != nil {
			logf.Close()
			return Response{Error: fmt.Sprintf("notify socket: %v", err)}
		}
		cmd.Env = append(cmd.Env, "NOTIFY_SOCKET="+sock)
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		if notify != nil {
			notify.Close()
		}
		return Response{Error: fmt.Sprintf("start %s: %v", req.Argv[0], err)}
	}
	p := &proc{cmd: cmd, exited: make(chan struct{}), logf: logf}
	go func() {
		_ = cmd.Wait()
		logf.Close()
		if notify != nil {
			notify.Close() // ends readNotify
		}
		close(p.exited)
	}()
	a.mu.Lock()
	if a.procs == nil {
		a.procs = map[int]*proc{}
	}
	a.procs[cmd.Process.Pid] = p
	a.mu.Unlock()
	resp := Response{PID: cmd.Process.Pid}
	if notify == nil {
		return resp
	}
	ready := make(chan struct{})
	go readNotify(notify, logName, ready)
	select {
	case <-ready:
		resp.Ready = true
	case <-p.exited:
		resp.Exited = true
	case <-time.After(req.timeout()):
	}
	return resp
}

// readNotify reads notify datagrams until conn closes, noting each in the process's log and
// closing ready at the first READY=1.
func readNotify(conn *net.UnixConn, logName string, ready chan struct{}) {
	logf, _ := os.OpenFile(logName, os.O_WRONLY|os.O_APPEND, 0)
	if logf != nil {
		defer logf.Close()
	}
	buf := make([]byte, 4096)
	seen := false
	for {
		n, err := conn.Read(buf)
		if err != nil {
			return
		}
		msg := string(buf[:n])
		if logf != nil {
			fmt.Fprintf(logf, "=== agent: notify %q\n", msg)
		}
		for _, line := range strings.Split(msg, "\n") {
			if line == "READY=1" && !seen {
				seen = true
				close(ready)
			}
		}
	}
}

func (a *Agent) proc(pid int) *proc {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.procs[pid]
}

func (a *Agent) signal(req Request) Response {
	p := a.proc(req.PID)
	if p == nil {
		return Response{Error: fmt.Sprintf("pid %d: not a process this agent started", req.PID)}
	}
	select {
	case <-p.exited:
		return Response{Error: fmt.Sprintf("pid %d has exited", req.PID), Exited: true}
	default:
	}
	if err := p.cmd.Process.Signal(syscall.Signal(req.Signal)); err != nil {
		return Response{Error: fmt.Sprintf("signal %d to pid %d: %v", req.Signal, req.PID, err)}
	}
	return Response{PID: req.PID}
}

func (a *Agent) wait(req Request) Response {
	p := a.proc(req.PID)
	if p == nil {
		return Response{Error: fmt.Sprintf("pid %d: not a process this agent started", req.PID)}
	}
	select {
	case <-p.exited:
	case <-time.After(req.timeout()):
		return Response{PID: req.PID}
	}
	a.mu.Lock()
	delete(a.procs, req.PID)
	a.mu.Unlock()
	resp := exitOf(p.cmd.ProcessState)
	resp.PID = req.PID
	return resp
}

// capped keeps the first max bytes written to it and counts the rest.
type capped struct {
	max     int
	buf     bytes.Buffer
	dropped int
}

func (c *capped) Write(p []byte) (int, error) {
	n := len(p)
	if room := max(c.max-c.buf.Len(), 0); room < n {
		c.dropped += n - room
		p = p[:room]
	}
	c.buf.Write(p)
	return n, nil
}

func (c *capped) Bytes() []byte {
	if c.dropped > 0 {
		return append(c.buf.Bytes(), fmt.Sprintf("\n... (%d bytes dropped)\n", c.dropped)...)
	}
	return c.buf.Bytes()
}

// readResponse reads the agent's answer for Client, bounded: base64 makes the two outputs 4/3
// of their size.
func readResponse(r io.Reader) (Response, error) {
	var resp Response
	err := json.NewDecoder(bufio.NewReader(io.LimitReader(r, 3*maxOutput+maxRequest))).Decode(&resp)
	return resp, err
}
