package netlab

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startAgent serves an Agent on a loopback port for the test.
func startAgent(t *testing.T) *Client {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- (&Agent{}).Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return &Client{Addr: ln.Addr().String()}
}

func TestAgentRun(t *testing.T) {
	c := startAgent(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name       string
		req        Request
		exit, sig  int
		timedOut   bool
		out, err   string
		agentError bool
	}{
		{name: "status and output", req: Request{Argv: []string{"sh", "-c", "echo out; echo err >&2; exit 3"}},
			exit: 3, out: "out\n", err: "err\n"},
		{name: "stdin", req: Request{Argv: []string{"cat"}, Stdin: []byte("in")}, out: "in"},
		{name: "env and dir", req: Request{Argv: []string{"sh", "-c", `echo "$X $(pwd)"`}, Env: []string{"X=1"}, Dir: "/"},
			out: "1 /\n"},
		{name: "signal", req: Request{Argv: []string{"sh", "-c", "kill -TERM $$"}}, exit: -1, sig: int(syscall.SIGTERM)},
		// The shell's child holds the pipes: the whole group goes.
		{name: "timeout", req: Request{Argv: []string{"sh", "-c", "sleep 60 & wait"}, Timeout: 200 * time.Millisecond},
			exit: -1, sig: int(syscall.SIGKILL), timedOut: true},
		{name: "no such command", req: Request{Argv: []string{"/nonexistent/cmd"}}, agentError: true},
		{name: "no command", req: Request{}, agentError: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.req.Op = OpRun
			resp, err := c.Do(ctx, tc.req)
			if tc.agentError {
				if err == nil || resp.Error == "" {
					t.Fatalf("got %+v, %v: want the agent's error", resp, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if resp.Exit != tc.exit || resp.Signal != tc.sig || resp.TimedOut != tc.timedOut ||
				string(resp.Stdout) != tc.out || string(resp.Stderr) != tc.err {
				t.Errorf("got exit %d signal %d timed out %v stdout %q stderr %q", resp.Exit, resp.Signal, resp.TimedOut, resp.Stdout, resp.Stderr)
			}
		})
	}
}

func TestAgentPing(t *testing.T) {
	c := startAgent(t)
	resp, err := c.WaitUp(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.BootID) != 36 || resp.Uptime <= 0 {
		t.Errorf("ping: boot %q, up %v", resp.BootID, resp.Uptime)
	}
	if _, err := c.Do(context.Background(), Request{Op: "reboot"}); err == nil {
		t.Error("an unknown op was accepted")
	}
}

func TestClientNoAgent(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &Client{Addr: ln.Addr().String()}
	ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := c.WaitUp(ctx); err == nil {
		t.Error("WaitUp with no agent returned")
	}
}

// TestHelperProcess is the process TestAgentStart starts (not a test of its own): with
// NETLAB_HELPER=ready it sends READY=1 to $NOTIFY_SOCKET and waits for a signal; with
// NETLAB_HELPER=exit it exits with status 7.
func TestHelperProcess(t *testing.T) {
	switch os.Getenv("NETLAB_HELPER") {
	case "ready":
		c, err := net.Dial("unixgram", os.Getenv("NOTIFY_SOCKET"))
		if err != nil {
			os.Exit(2)
		}
		c.Write([]byte("STATUS=starting\nREADY=1"))
		os.Stdout.WriteString("helper ready\n")
		time.Sleep(time.Minute)
		os.Exit(0)
	case "exit":
		os.Exit(7)
	}
}

func helper(kind string) Request {
	return Request{Op: OpStart, Argv: []string{os.Args[0], "-test.run=^TestHelperProcess$"},
		Env: []string{"NETLAB_HELPER=" + kind}, Notify: true, Timeout: 30 * time.Second}
}

func TestAgentStart(t *testing.T) {
	c := startAgent(t)
	ctx := context.Background()
	log := filepath.Join(t.TempDir(), "log")

	req := helper("ready")
	req.Log = log
	resp, err := c.Do(ctx, req)
	if err != nil || !resp.Ready || resp.Exited || resp.PID == 0 {
		t.Fatalf("start: %+v, %v", resp, err)
	}
	if w, err := c.Do(ctx, Request{Op: OpWait, PID: resp.PID, Timeout: 100 * time.Millisecond}); err != nil || w.Exited {
		t.Errorf("wait on a running process: %+v, %v", w, err)
	}
	if _, err := c.Do(ctx, Request{Op: OpSignal, PID: resp.PID, Signal: int(syscall.SIGTERM)}); err != nil {
		t.Fatal(err)
	}
	w, err := c.Do(ctx, Request{Op: OpWait, PID: resp.PID, Timeout: 30 * time.Second})
	if err != nil || !w.Exited || w.Signal != int(syscall.SIGTERM) || w.Exit != -1 {
		t.Errorf("wait after SIGTERM: %+v, %v", w, err)
	}
	if _, err := c.Do(ctx, Request{Op: OpWait, PID: resp.PID}); err == nil {
		t.Error("a second wait on a process already reported")
	}
	b, _ := os.ReadFile(log)
	if !strings.Contains(string(b), "helper ready") || !strings.Contains(string(b), `notify "STATUS=starting\nREADY=1"`) {
		t.Errorf("log:\n%s", b)
	}

	resp, err = c.Do(ctx, helper("exit"))
	if err != nil || resp.Ready || !resp.Exited {
		t.Fatalf("start of a process that exits before READY=1: %+v, %v", resp, err)
	}
	if w, err := c.Do(ctx, Request{Op: OpWait, PID: resp.PID}); err != nil || w.Exit != 7 {
		t.Errorf("wait: %+v, %v", w, err)
	}
	if _, err := c.Do(ctx, Request{Op: OpSignal, PID: 1, Signal: int(syscall.SIGTERM)}); err == nil {
		t.Error("signal to a process the agent did not start")
	}
}

func TestCapped(t *testing.T) {
	for _, tc := range []struct {
		writes []string
		want   string
	}{
		{[]string{"ab", "cd"}, "abcd"},
		{[]string{"abcdef"}, "abcd\n... (2 bytes dropped)\n"},
		{[]string{"abc", "de", "f"}, "abcd\n... (2 bytes dropped)\n"},
	} {
		c := &capped{max: 4}
		for _, w := range tc.writes {
			if n, err := c.Write([]byte(w)); n != len(w) || err != nil {
				t.Errorf("Write(%q) = %d, %v", w, n, err)
			}
		}
		if got := string(c.Bytes()); got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.writes, got, tc.want)
		}
	}
}
