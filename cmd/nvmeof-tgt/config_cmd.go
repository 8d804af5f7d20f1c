package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/nvmeof-tgt/nvmeof-tgt/config"
)

func configCmd() *cobra.Command {
	c := &cobra.Command{Use: "config", Short: "Check, print or save configuration"}
	c.AddCommand(&cobra.Command{
		Use:   "validate FILE",
		Short: "Check a configuration file; every error names its key",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := config.LoadFile(args[0]); err != nil {
				var joined interface{ Unwrap() []error }
				if errors.As(err, &joined) {
					for _, e := range joined.Unwrap() {
						fmt.Fprintln(os.Stderr, e)
					}
					return fmt.Errorf("%s: %d problem(s)", args[0], len(joined.Unwrap()))
				}
				return err
			}
			fmt.Printf("%s: ok\n", args[0])
			return nil
		},
	})
	c.AddCommand(&cobra.Command{
		Use:   "default",
		Short: "Print the embedded default configuration",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, args []string) {
			os.Stdout.Write(config.Default())
		},
	})
	c.AddCommand(configSaveCmd())
	return c
}
