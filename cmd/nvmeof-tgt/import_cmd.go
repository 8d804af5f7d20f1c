package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/nvmeof-tgt/nvmeof-tgt/config"
)

func importNvmetcliCmd() *cobra.Command {
	var o config.ImportOptions
	c := &cobra.Command{
		Use:   "import-nvmetcli FILE",
		Short: "Convert an `nvmetcli save` JSON file to this target's YAML",
		Long: `Convert the JSON that nvmetcli save writes (by default /etc/nvmet/config.json)
to this target's configuration, printed on standard output. Every setting
that cannot be carried (ports of other transports or with TLS, disabled
namespaces, subsystems linked to no RDMA or TCP port, ...) is named on
standard error, one line each. Port IDs,
ANA group states, referrals, CNTLID ranges and the ports each subsystem is
linked to are carried, so hosts see what nvmet showed them. It exits 0
when it converted, even with notes; run "config validate" on the result
before serving it.

A host with a DH-HMAC-CHAP key on the allowed list of a subsystem closed to
other hosts must authenticate to nvmet, so it is carried with its keys:
--key-dir DIR writes each key to a file of its own in DIR (created if
missing; mode 0600; existing files are never overwritten) and the
configuration names the files; --inline-keys puts the keys in the
configuration itself. With neither, or with a key that is not valid, the
import fails, unless --drop-keys leaves such hosts out of the allowed lists
(so they cannot connect at all, rather than connect unauthenticated). Keys
are never printed, except in the configuration with --inline-keys.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := os.ReadFile(args[0])
			if err != nil {
				return err
			}
			if o.KeyDir != "" {
				if o.KeyDir, err = filepath.Abs(o.KeyDir); err != nil {
					return err
				}
			}
			im, err := config.ImportNvmetcli(data, o)
			if errors.Is(err, config.ErrKeysNotCarried) {
				hint := "give --key-dir DIR or --inline-keys to carry the keys, or --drop-keys to leave these hosts out of their subsystems"
				if o.KeyDir != "" || o.InlineKeys {
					hint = "fix the keys in nvmet (nvme gen-dhchap-key), or give --drop-keys to leave these hosts out of their subsystems"
				}
				return fmt.Errorf("%s: %w; %s", args[0], err, hint)
			}
			if err != nil {
				return fmt.Errorf("%s: %w", args[0], err)
			}
			for _, n := range im.Notes {
				fmt.Fprintln(cmd.ErrOrStderr(), n)
			}
			if err := writeKeyFiles(im.KeyFiles); err != nil {
				return err
			}
			if len(im.KeyFiles) > 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "wrote %d DH-HMAC-CHAP key files to %s\n", len(im.KeyFiles), o.KeyDir)
			}
			if im.InlineSecrets {
				fmt.Fprintln(cmd.ErrOrStderr(), "warning: the configuration holds DH-HMAC-CHAP keys (--inline-keys): save it readable by its owner only (mode 0600), as serve requires")
			}
			_, err = cmd.OutOrStdout().Write(im.YAML)
			return err
		},
	}
	c.Flags().StringVar(&o.KeyDir, "key-dir", "", "write each host's DH-HMAC-CHAP keys to files in `DIR`, which the configuration names")
	c.Flags().BoolVar(&o.InlineKeys, "inline-keys", false, "put DH-HMAC-CHAP keys in the configuration itself (keep it mode 0600)")
	c.Flags().BoolVar(&o.DropKeys, "drop-keys", false, "leave hosts whose DH-HMAC-CHAP keys are not carried out of their subsystems' allowed hosts")
	c.MarkFlagsMutuallyExclusive("key-dir", "inline-keys")
	return c
}

// writeKeyFiles writes each key to its file, mode 0600, owned by whoever
// runs the import. It refuses if any file exists, before writing any, and
// on failure removes the ones it wrote. Errors name files, never keys.
func writeKeyFiles(files []config.KeyFile) (err error) {
	for _, f := range files {
		if _, err := os.Lstat(f.Path); err == nil {
			return fmt.Errorf("key file %s exists: not overwritten; move it away or choose another --key-dir", f.Path)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	var written []string
	defer func() {
		if err != nil {
			for _, p := range written {
				os.Remove(p)
			}
		}
	}()
	for _, f := range files {
		if err := os.MkdirAll(filepath.Dir(f.Path), 0o700); err != nil {
			return err
		}
		// O_EXCL: a file that appeared since the check is not overwritten.
		fh, err := os.OpenFile(f.Path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		written = append(written, f.Path)
		err = fh.Chmod(0o600) // whatever the umask
		if err == nil {
			_, err = fh.WriteString(f.Secret + "\n")
		}
		if err == nil {
			err = fh.Sync()
		}
		if cerr := fh.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("write key file %s: %w", f.Path, err)
		}
	}
	return nil
}
