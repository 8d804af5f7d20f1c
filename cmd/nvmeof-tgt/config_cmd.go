package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/nvmeof-tgt/nvmeof-tgt/config"
)

func configCmd() *cobra.Command {
	c := &cobra.Command{Use: "config", Short: "Check, print, save or import configuration"}
	c.AddCommand(&cobra.Command{
		Use:   "validate FILE",
		Short: "Check a configuration file as serve would, without starting anything; every problem names its key",
		Long: `Check a configuration file as serve would, without starting anything:
unknown keys, wrong types, values out of range, and namespace paths on this
machine (a file's directory exists, a block device is one). Every problem is
printed as "key: message", one per line, then how many there were.
NVMEOF_TGT_* environment variables apply, and a bad one is named as such.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			warnings, err := config.CheckFileWith(args[0], unserved)
			out := cmd.ErrOrStderr()
			for _, w := range warnings {
				fmt.Fprintln(out, "warning:", w)
			}
			problems := config.Problems(err)
			for _, p := range problems {
				fmt.Fprintln(out, p)
			}
			switch len(problems) {
			case 0:
				fmt.Fprintf(cmd.OutOrStdout(), "%s: ok\n", args[0])
				return nil
			case 1:
				return fmt.Errorf("%s: 1 problem", args[0])
			}
			return fmt.Errorf("%s: %d problems", args[0], len(problems))
		},
	})
	c.AddCommand(&cobra.Command{
		Use:   "default",
		Short: "Print the embedded default configuration",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, args []string) {
			cmd.OutOrStdout().Write(config.Default())
		},
	})
	c.AddCommand(importNvmetcliCmd(), configSaveCmd())
	return c
}
