package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/nvmeof-tgt/nvmeof-tgt/control"
)

// The commands that change a running target through its management API.
// Tables are for people; --json prints the API's answer as it came, for
// scripts.

// ctlOptions are the flags every client command has.
type ctlOptions struct {
	socket string
	json   bool
}

// defaultSocket is where serve listens unless told otherwise: the
// NVMEOF_TGT_API_SOCKET serve reads too, or config.DefaultAPISocket.
func defaultSocket() string {
	if s := os.Getenv(config.EnvPrefix + "_API_SOCKET"); s != "" {
		return s
	}
	return config.DefaultAPISocket
}

func (o *ctlOptions) addFlags(c *cobra.Command, withJSON bool) {
	c.PersistentFlags().StringVar(&o.socket, "socket", defaultSocket(), "the target's API socket (api.socket)")
	if withJSON {
		c.PersistentFlags().BoolVar(&o.json, "json", false, "print the API's JSON instead of a table")
	}
}

func (o *ctlOptions) client() *apiClient { return newAPIClient(o.socket) }

// ctlCmds returns the client commands for the root command.
func ctlCmds() []*cobra.Command {
	o := &ctlOptions{}
	cmds := []*cobra.Command{statusCmd(o), subsystemCmd(o), nsCmd(o), hostCmd(o), portCmd(o), reloadCmd(o)}
	for _, c := range cmds {
		o.addFlags(c, true)
	}
	return cmds
}

func statusCmd(o *ctlOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Show ports, subsystems, namespaces and connected controllers of the running target",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var st control.Status
			raw, err := o.client().get(cmd.Context(), "/v1/status", &st)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if o.json {
				w.Write(raw)
				return nil
			}
			printPorts(w, st.Ports)
			fmt.Fprintln(w)
			printSubsystems(w, st.Subsystems)
			fmt.Fprintln(w)
			var rows [][]string
			for _, s := range st.Subsystems {
				for _, n := range s.Namespaces {
					rows = append(rows, append([]string{s.NQN}, namespaceRow(n)...))
				}
			}
			table(w, "NAMESPACES", append([]string{"SUBSYSTEM"}, namespaceHeader...), rows)
			fmt.Fprintln(w)
			rows = nil
			now := time.Now()
			for _, c := range st.Controllers {
				rows = append(rows, []string{c.SubNQN, c.HostNQN, c.HostAddress, strconv.Itoa(int(c.CNTLID)),
					strconv.Itoa(int(c.PortID)), strconv.Itoa(c.IOQueues), c.KATO.String(), now.Sub(c.Connected).Round(time.Second).String()})
			}
			table(w, "CONTROLLERS", []string{"SUBSYSTEM", "HOST NQN", "HOST ADDRESS", "CNTLID", "PORT", "I/O QUEUES", "KATO", "CONNECTED"}, rows)
			return nil
		},
	}
}

// table writes a titled table, or the title and "none".
func table(w io.Writer, title string, header []string, rows [][]string) {
	if title != "" {
		fmt.Fprintln(w, title)
	}
	if len(rows) == 0 {
		if title != "" {
			fmt.Fprintln(w, "none")
		}
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	tw.Flush()
}

func printPorts(w io.Writer, ports []control.PortStatus) {
	var rows [][]string
	for _, p := range ports {
		rows = append(rows, []string{strconv.Itoa(int(p.ID)), p.Transport, p.Address, strconv.Itoa(p.Port)})
	}
	table(w, "PORTS", []string{"ID", "TRANSPORT", "ADDRESS", "PORT"}, rows)
}

func printSubsystems(w io.Writer, subs []control.SubsystemStatus) {
	var rows [][]string
	for _, s := range subs {
		hosts := strings.Join(s.Hosts, ",")
		if s.AllowAnyHost {
			hosts = "any"
		}
		rows = append(rows, []string{s.NQN, strconv.Itoa(len(s.Namespaces)), hosts, s.Serial, s.Model})
	}
	table(w, "SUBSYSTEMS", []string{"NQN", "NAMESPACES", "HOSTS", "SERIAL", "MODEL"}, rows)
}

var namespaceHeader = []string{"NSID", "BACKEND", "SIZE", "BLOCK SIZE", "ACCESS", "PATH", "UUID"}

func namespaceRow(n control.NamespaceStatus) []string {
	access, path := "rw", n.Path
	if n.ReadOnly {
		access = "ro"
	}
	if path == "" {
		path = "-"
	}
	return []string{strconv.FormatUint(uint64(n.NSID), 10), n.Backend, config.Bytes(n.Size).String(),
		strconv.FormatUint(uint64(n.BlockSize), 10), access, path, n.UUID}
}

// change sends a change and prints its Result: each step applied, then
// each key that takes effect at the next start. When the target made some
// steps before failing, those are printed before the error is returned.
func (o *ctlOptions) change(cmd *cobra.Command, method, path string, in any) error {
	raw, err := o.client().do(cmd.Context(), method, path, in)
	w := cmd.OutOrStdout()
	var ae *apiError
	if errors.As(err, &ae) {
		if o.json {
			w.Write(ae.body)
		} else {
			for _, s := range ae.Applied {
				fmt.Fprintln(w, "applied before the failure:", s)
			}
		}
		return err
	}
	if err != nil {
		return err
	}
	if o.json {
		w.Write(raw)
		return nil
	}
	var res control.Result
	if err := json.Unmarshal(raw, &res); err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	for _, s := range res.Applied {
		fmt.Fprintln(w, s)
	}
	for _, k := range res.Restart {
		fmt.Fprintln(w, "takes effect at the next start:", k)
	}
	if len(res.Applied) == 0 && len(res.Restart) == 0 {
		fmt.Fprintln(w, "nothing to change")
	}
	if len(res.Applied) > 0 && !res.Persisted && path != "/v1/reload" {
		fmt.Fprintln(cmd.ErrOrStderr(), "note: the target runs without a configuration file; this change lasts until it stops (save it with: nvmeof-tgt config save)")
	}
	return nil
}

func subsystemPath(nqn string, rest ...string) string {
	p := "/v1/subsystems/" + url.PathEscape(nqn)
	for _, r := range rest {
		p += "/" + url.PathEscape(r)
	}
	return p
}

func subsystemCmd(o *ctlOptions) *cobra.Command {
	c := &cobra.Command{Use: "subsystem", Aliases: []string{"subsys"}, Short: "Add, remove or list subsystems of the running target"}
	var req control.SubsystemRequest
	add := &cobra.Command{
		Use:   "add NQN",
		Short: "Add a subsystem, with no namespaces (add them with ns add)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req.NQN = args[0]
			return o.change(cmd, http.MethodPost, "/v1/subsystems", req)
		},
	}
	add.Flags().BoolVar(&req.AllowAnyHost, "allow-any-host", false, "let any host connect")
	add.Flags().StringArrayVar(&req.Hosts, "host", nil, "a host NQN allowed to connect (repeat for more)")
	add.Flags().StringVar(&req.Serial, "serial", "", "serial number (default: derived from the NQN)")
	add.Flags().StringVar(&req.Model, "model", "", "model number (default: nvmeof-tgt)")
	c.AddCommand(add, &cobra.Command{
		Use:   "remove NQN",
		Short: "Remove a subsystem; its hosts are disconnected",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.change(cmd, http.MethodDelete, subsystemPath(args[0]), nil)
		},
	}, &cobra.Command{
		Use:   "list",
		Short: "List subsystems",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var subs []control.SubsystemStatus
			raw, err := o.client().get(cmd.Context(), "/v1/subsystems", &subs)
			if err != nil {
				return err
			}
			if o.json {
				cmd.OutOrStdout().Write(raw)
				return nil
			}
			printSubsystems(cmd.OutOrStdout(), subs)
			return nil
		},
	})
	return c
}

// parseSize reads a size as the configuration file writes it.
func parseSize(s string) (control.Size, error) {
	b, err := config.ParseBytes(s)
	return control.Size(b), err
}

func nsCmd(o *ctlOptions) *cobra.Command {
	c := &cobra.Command{Use: "ns", Aliases: []string{"namespace"}, Short: "Add, remove, resize or list namespaces of a subsystem"}
	var (
		req  control.NamespaceRequest
		size string
	)
	add := &cobra.Command{
		Use:   "add NQN --nsid N",
		Short: "Add a namespace to a subsystem",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if size != "" {
				s, err := parseSize(size)
				if err != nil {
					return fmt.Errorf("--size: %w", err)
				}
				req.Size = s
			}
			return o.change(cmd, http.MethodPost, subsystemPath(args[0], "namespaces"), req)
		},
	}
	add.Flags().Uint32Var(&req.NSID, "nsid", 0, "namespace ID, from 1")
	add.MarkFlagRequired("nsid")
	add.Flags().StringVar(&req.Backend, "backend", "", "memory, file or block (default: from --path)")
	add.Flags().StringVar(&req.Path, "path", "", "file or block device")
	add.Flags().StringVar(&size, "size", "", "size, e.g. 1GiB: required for memory; for a file, the size to create or grow to")
	add.Flags().Uint32Var(&req.BlockSize, "block-size", 0, "512 or 4096 (default 512; a block device uses its own)")
	add.Flags().StringVar(&req.UUID, "uuid", "", "namespace UUID (default: derived from the NQN and NSID)")
	add.Flags().BoolVar(&req.ReadOnly, "read-only", false, "refuse writes")
	add.Flags().BoolVar(&req.BufferedIO, "buffered-io", false, "use the page cache instead of O_DIRECT")

	var force bool
	resize := &cobra.Command{
		Use:   "resize NQN NSID SIZE",
		Short: "Resize a file or block namespace; hosts are told of the new size",
		Long: "Resize a file or block namespace; hosts are told of the new size.\n" +
			"Shrinking loses the data past the new end and needs --force. SIZE 0 reads the backend's size again\n" +
			"(a file's length after it grew, a block device's whole size after lvextend).",
		Args: cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := parseSize(args[2])
			if err != nil {
				return fmt.Errorf("size: %w", err)
			}
			return o.change(cmd, http.MethodPost, subsystemPath(args[0], "namespaces", args[1], "resize"), control.ResizeRequest{Size: &s, Force: force})
		},
	}
	resize.Flags().BoolVar(&force, "force", false, "allow the namespace to shrink")

	c.AddCommand(add, resize, &cobra.Command{
		Use:   "remove NQN NSID",
		Short: "Remove a namespace; hosts see it go",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.change(cmd, http.MethodDelete, subsystemPath(args[0], "namespaces", args[1]), nil)
		},
	}, &cobra.Command{
		Use:   "list NQN",
		Short: "List the namespaces of a subsystem",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var nss []control.NamespaceStatus
			raw, err := o.client().get(cmd.Context(), subsystemPath(args[0], "namespaces"), &nss)
			if err != nil {
				return err
			}
			if o.json {
				cmd.OutOrStdout().Write(raw)
				return nil
			}
			var rows [][]string
			for _, n := range nss {
				rows = append(rows, namespaceRow(n))
			}
			table(cmd.OutOrStdout(), "", namespaceHeader, rows)
			return nil
		},
	})
	return c
}

func hostCmd(o *ctlOptions) *cobra.Command {
	c := &cobra.Command{Use: "host", Short: "Allow, remove or list the hosts of a subsystem"}
	c.AddCommand(&cobra.Command{
		Use:   "add NQN HOSTNQN",
		Short: "Allow a host to connect to a subsystem",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.change(cmd, http.MethodPost, subsystemPath(args[0], "hosts"), control.HostRequest{NQN: args[1]})
		},
	}, &cobra.Command{
		Use:   "remove NQN HOSTNQN",
		Short: "Remove a host from a subsystem; its controllers are disconnected",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.change(cmd, http.MethodDelete, subsystemPath(args[0], "hosts", args[1]), nil)
		},
	}, &cobra.Command{
		Use:   "list NQN",
		Short: "List the hosts allowed on a subsystem, one per line",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var hosts []control.HostRequest
			raw, err := o.client().get(cmd.Context(), subsystemPath(args[0], "hosts"), &hosts)
			if err != nil {
				return err
			}
			if o.json {
				cmd.OutOrStdout().Write(raw)
				return nil
			}
			for _, h := range hosts {
				fmt.Fprintln(cmd.OutOrStdout(), h.NQN)
			}
			return nil
		},
	})
	return c
}

func portCmd(o *ctlOptions) *cobra.Command {
	c := &cobra.Command{Use: "port", Short: "Add, remove or list the ports the target listens on"}
	portFlags := func(c *cobra.Command, p *control.PortRequest) {
		c.Flags().StringVar(&p.Transport, "transport", "rdma", "rdma")
		c.Flags().StringVar(&p.Address, "address", "", "IP address; 0.0.0.0 or :: for all")
		c.Flags().IntVar(&p.Port, "port", 4420, "service port")
		c.MarkFlagRequired("address")
	}
	var addReq, rmReq control.PortRequest
	add := &cobra.Command{
		Use:   "add --address A",
		Short: "Listen on a port",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.change(cmd, http.MethodPost, "/v1/ports", addReq)
		},
	}
	portFlags(add, &addReq)
	remove := &cobra.Command{
		Use:   "remove --address A",
		Short: "Stop listening on a port; the controllers connected through it are disconnected",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			path := "/v1/ports/" + url.PathEscape(rmReq.Transport) + "/" + url.PathEscape(rmReq.Address) + "/" + strconv.Itoa(rmReq.Port)
			return o.change(cmd, http.MethodDelete, path, nil)
		},
	}
	portFlags(remove, &rmReq)
	c.AddCommand(add, remove, &cobra.Command{
		Use:   "list",
		Short: "List ports",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var ports []control.PortStatus
			raw, err := o.client().get(cmd.Context(), "/v1/ports", &ports)
			if err != nil {
				return err
			}
			if o.json {
				cmd.OutOrStdout().Write(raw)
				return nil
			}
			printPorts(cmd.OutOrStdout(), ports)
			return nil
		},
	})
	return c
}

func reloadCmd(o *ctlOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "reload",
		Short: "Apply the configuration file again, as a diff",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.change(cmd, http.MethodPost, "/v1/reload", nil)
		},
	}
}

// configSaveCmd is `config save`, in the config group.
func configSaveCmd() *cobra.Command {
	o := &ctlOptions{}
	c := &cobra.Command{
		Use:   "save",
		Short: "Print the running configuration as YAML that serve --config accepts",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			raw, err := o.client().do(cmd.Context(), http.MethodGet, "/v1/config", nil)
			if err != nil {
				return err
			}
			cmd.OutOrStdout().Write(raw)
			return nil
		},
	}
	o.addFlags(c, false)
	return c
}
