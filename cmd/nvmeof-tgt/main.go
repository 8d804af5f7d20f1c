// Command nvmeof-tgt is an NVMe over Fabrics target: it serves files, block
// devices and memory as NVMe namespaces over RDMA and TCP.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/nvmeof-tgt/nvmeof-tgt/control"
)

// Exit codes, so that scripts can tell the classes of failure apart
// (README.md, docs/api.md).
const (
	exitFailure     = 1 // anything else: the target could not make the change, a local error
	exitUsage       = 2 // the command line: an unknown command or flag, a missing or bad argument
	exitNotFound    = 3 // the API answered 404: no such subsystem, namespace, host or port
	exitConflict    = 4 // the API answered 409: e.g. it exists already
	exitUnreachable = 5 // no target answers on the socket, or it may not be used
	exitInvalid     = 6 // the API answered 400 or 413: the request was refused as invalid
)

const exitCodesHelp = `Exit codes: 0 success, 1 failure, 2 usage (a bad command line),
3 not found, 4 conflict (e.g. already exists), 5 the target is not running
or its socket is unreachable, 6 refused as invalid.`

func main() {
	err := rootCmd().Execute()
	if err != nil {
		fmt.Fprintln(os.Stderr, "nvmeof-tgt:", err)
	}
	os.Exit(exitCode(err))
}

// exitCode classes err. An error cobra returns before a command runs is
// about the command line; ranError marks those a command returns.
func exitCode(err error) int {
	var ran *ranError
	var usage *usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &usage), !errors.As(err, &ran):
		return exitUsage
	case control.IsUnreachable(err):
		return exitUnreachable
	case control.IsNotFound(err):
		return exitNotFound
	case control.IsConflict(err):
		return exitConflict
	case control.IsInvalid(err):
		return exitInvalid
	}
	return exitFailure
}

func rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "nvmeof-tgt",
		Short:         "NVMe over Fabrics target (RDMA, TCP)",
		Long:          "NVMe over Fabrics target (RDMA, TCP).\n\n" + exitCodesHelp,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       readBuildInfo().String(),
	}
	root.AddCommand(serveCmd(), configCmd(), softRoCECmd(), versionCmd())
	root.AddCommand(ctlCmds()...)
	markRun(root)
	return root
}

// ranError is an error a command returned when it ran.
type ranError struct{ err error }

func (e *ranError) Error() string { return e.err.Error() }
func (e *ranError) Unwrap() error { return e.err }

// markRun wraps the RunE of c and its subcommands so that their errors
// are ranErrors.
func markRun(c *cobra.Command) {
	if run := c.RunE; run != nil {
		c.RunE = func(cmd *cobra.Command, args []string) error {
			if err := run(cmd, args); err != nil {
				return &ranError{err}
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		markRun(sub)
	}
}
