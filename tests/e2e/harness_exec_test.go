//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Timeouts for external commands. TCG emulation is slow; these are bounds, not expectations.
const (
	cmdTimeout     = 60 * time.Second // nvme-cli and friends
	connectTimeout = 90 * time.Second
	fioTimeout     = 5 * time.Minute
)

// cmdResult is a finished external command.
type cmdResult struct {
	line   string
	stdout []byte
	stderr []byte
	err    error
	took   time.Duration
}

func (r cmdResult) String() string {
	return fmt.Sprintf("$ %s\n(%v, took %v)\nstdout:\n%s\nstderr:\n%s", r.line, errOrOK(r.err),
		r.took.Round(time.Millisecond), limit(r.stdout), limit(r.stderr))
}

func errOrOK(err error) string {
	if err == nil {
		return "exit 0"
	}
	return err.Error()
}

func limit(b []byte) string {
	const max = 8 << 10
	if len(b) > max {
		return string(b[:max]) + fmt.Sprintf("\n... (%d bytes more)", len(b)-max)
	}
	return string(b)
}

// execCmd runs name with a deadline; a command that outlives it is killed.
func execCmd(timeout time.Duration, name string, args ...string) cmdResult {
	return execCmdEnv(timeout, nil, name, args...)
}

// execCmdEnv is execCmd with env (KEY=VALUE) added to the environment.
func execCmdEnv(timeout time.Duration, env []string, name string, args ...string) cmdResult {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.WaitDelay = 5 * time.Second // do not hang on pipes held by orphans
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	if ctx.Err() == context.DeadlineExceeded {
		err = fmt.Errorf("timed out after %v: %w", timeout, err)
	}
	return cmdResult{
		line:   strings.Join(append([]string{name}, args...), " "),
		stdout: stdout.Bytes(), stderr: stderr.Bytes(), err: err, took: time.Since(start),
	}
}

// run runs a command and logs it in full if it fails.
func run(t testing.TB, timeout time.Duration, name string, args ...string) cmdResult {
	t.Helper()
	r := execCmd(timeout, name, args...)
	if r.err != nil {
		t.Logf("command failed:\n%s", r)
	}
	return r
}

// mustRun runs a command and ends the test if it fails.
func mustRun(t testing.TB, timeout time.Duration, name string, args ...string) []byte {
	t.Helper()
	r := run(t, timeout, name, args...)
	if r.err != nil {
		t.Fatalf("%s: %v", r.line, r.err)
	}
	return r.stdout
}

// nvmeJSON runs `nvme ARGS... -o json` and decodes its output into v.
func nvmeJSON(t testing.TB, v any, args ...string) {
	t.Helper()
	out := mustRun(t, cmdTimeout, "nvme", append(args, "-o", "json")...)
	if err := json.Unmarshal(out, v); err != nil {
		t.Fatalf("nvme %s: decode JSON: %v\n%s", strings.Join(args, " "), err, limit(out))
	}
}

// runOut and runQuiet are for code without a testing.T; the error carries stderr.
func runOut(timeout time.Duration, name string, args ...string) (string, error) {
	r := execCmd(timeout, name, args...)
	if r.err != nil {
		return string(r.stdout), fmt.Errorf("%s: %w: %s", r.line, r.err, strings.TrimSpace(string(r.stderr)))
	}
	return string(r.stdout), nil
}

func runQuiet(timeout time.Duration, name string, args ...string) error {
	_, err := runOut(timeout, name, args...)
	return err
}

var errTimeout = errors.New("timed out")

// waitFor polls cond every 100 ms until it holds or timeout passes.
func waitFor(timeout time.Duration, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return nil
		}
		if time.Now().After(deadline) {
			return errTimeout
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// jsonUint decodes an unsigned integer that nvme-cli prints either as a number or, for 128-bit
// counters such as smart-log data_units_read in nvme-cli 2.3, as a decimal string.
type jsonUint uint64

func (u *jsonUint) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	base := 10
	if strings.HasPrefix(s, "0x") {
		base = 0
	}
	v, err := strconv.ParseUint(s, base, 64)
	if err != nil {
		return fmt.Errorf("not an unsigned integer: %s", b)
	}
	*u = jsonUint(v)
	return nil
}
