package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/nvmeof-tgt/nvmeof-tgt/config"
)

func importNvmetcliCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "import-nvmetcli FILE",
		Short: "Convert an `nvmetcli save` JSON file to this target's YAML",
		Long: `Convert the JSON that nvmetcli save writes (by default /etc/nvmet/config.json)
to this target's configuration, printed on standard output. Every setting
that cannot be carried (TCP ports, referrals, disabled namespaces,
per-port subsystem links, ...) is named on standard error, one line each.
It exits 0 when it converted, even with notes; run "config validate" on the
result before serving it.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := os.ReadFile(args[0])
			if err != nil {
				return err
			}
			yaml, notes, err := config.ImportNvmetcli(data)
			if err != nil {
				return fmt.Errorf("%s: %w", args[0], err)
			}
			for _, n := range notes {
				fmt.Fprintln(cmd.ErrOrStderr(), n)
			}
			_, err = cmd.OutOrStdout().Write(yaml)
			return err
		},
	}
}
