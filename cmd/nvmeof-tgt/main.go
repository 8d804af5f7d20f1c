// Command nvmeof-tgt is an NVMe over Fabrics target: it serves files, block
// devices and memory as NVMe namespaces over RDMA.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

func main() {
	if err := rootCmd().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "nvmeof-tgt:", err)
		os.Exit(1)
	}
}

func rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "nvmeof-tgt",
		Short:         "NVMe over Fabrics target (RDMA)",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       readBuildInfo().String(),
	}
	root.AddCommand(serveCmd(), configCmd(), softRoCECmd(), versionCmd())
	root.AddCommand(ctlCmds()...)
	return root
}
