package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/nvmeof-tgt/nvmeof-tgt/control"
	"github.com/nvmeof-tgt/nvmeof-tgt/limits"
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

func (o *ctlOptions) client() *control.Client { return control.NewClient(o.socket) }

// ctlCmds returns the client commands for the root command.
func ctlCmds() []*cobra.Command {
	o := &ctlOptions{}
	cmds := []*cobra.Command{statusCmd(o), subsystemCmd(o), nsCmd(o), hostCmd(o), portCmd(o), reloadCmd(o), groupCmd(o)}
	for _, c := range cmds {
		o.addFlags(c, true)
	}
	return cmds
}

func statusCmd(o *ctlOptions) *cobra.Command {
	return showCmd(o, "status", "Show ports, subsystems, namespaces and connected controllers of the running target", cobra.NoArgs,
		func(ctx context.Context, c *control.Client, _ []string) (control.Status, error) { return c.Status(ctx) },
		func(w io.Writer, st control.Status) {
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
			printAccess(w, st.Subsystems)
			fmt.Fprintln(w)
			rows = nil
			now := time.Now()
			for _, c := range st.Controllers {
				rows = append(rows, []string{c.SubNQN, c.HostNQN, c.HostAddress, strconv.Itoa(int(c.CNTLID)),
					strconv.Itoa(int(c.PortID)), strconv.Itoa(c.IOQueues), c.KATO.String(), now.Sub(c.Connected).Round(time.Second).String()})
			}
			table(w, "CONTROLLERS", []string{"SUBSYSTEM", "HOST NQN", "HOST ADDRESS", "CNTLID", "PORT", "I/O QUEUES", "KATO", "CONNECTED"}, rows)
			if st.Group != nil {
				fmt.Fprintln(w)
				printGroup(w, st.Group)
			}
		})
}

// showCmd is a command that reads one resource: it prints the API's JSON
// with --json, else what print makes of it.
func showCmd[T any](o *ctlOptions, use, short string, args cobra.PositionalArgs,
	get func(ctx context.Context, c *control.Client, args []string) (T, error), print func(w io.Writer, v T)) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  args,
		RunE: func(cmd *cobra.Command, args []string) error {
			v, err := get(cmd.Context(), o.client(), args)
			if err != nil {
				return err
			}
			if o.json {
				return control.EncodeJSON(cmd.OutOrStdout(), v)
			}
			print(cmd.OutOrStdout(), v)
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
		state := p.State
		if p.Reason != "" {
			state += ": " + p.Reason
		}
		rows = append(rows, []string{strconv.Itoa(int(p.ID)), p.Transport, p.Address, strconv.Itoa(p.Port), state, anaStates(p.ANAGroups)})
	}
	table(w, "PORTS", []string{"ID", "TRANSPORT", "ADDRESS", "PORT", "STATE", "ANA GROUPS"}, rows)
}

// anaStates writes group states as "1=optimized 2=inaccessible", by group.
func anaStates(groups map[string]string) string {
	ids := slices.Collect(maps.Keys(groups))
	slices.SortFunc(ids, func(a, b string) int { x, _ := strconv.Atoi(a); y, _ := strconv.Atoi(b); return x - y })
	out := make([]string, len(ids))
	for i, g := range ids {
		out[i] = g + "=" + groups[g]
	}
	if len(out) == 0 {
		return "-"
	}
	return strings.Join(out, " ")
}

func printSubsystems(w io.Writer, subs []control.SubsystemStatus) {
	var rows [][]string
	for _, s := range subs {
		hosts := strings.Join(s.Hosts, ",")
		if s.AllowAnyHost {
			hosts = "any"
		}
		ports := "all"
		if len(s.Ports) > 0 {
			ports = strings.Trim(strings.Join(strings.Fields(fmt.Sprint(s.Ports)), ","), "[]")
		}
		rows = append(rows, []string{s.NQN, strconv.Itoa(len(s.Namespaces)), hosts, ports,
			fmt.Sprintf("%d-%d", s.CNTLIDMin, s.CNTLIDMax), s.Serial, s.Model})
	}
	table(w, "SUBSYSTEMS", []string{"NQN", "NAMESPACES", "HOSTS", "PORTS", "CNTLIDS", "SERIAL", "MODEL"}, rows)
}

var namespaceHeader = []string{"NSID", "BACKEND", "SIZE", "BLOCK SIZE", "ACCESS", "ANA GROUP", "RESERVATION", "PATH", "UUID"}

func namespaceRow(n control.NamespaceStatus) []string {
	access, path := "rw", n.Path
	if n.ReadOnly {
		access = "ro"
	}
	if n.Backend == config.BackendRBD {
		path = n.Pool + "/" + n.Image
	}
	if path == "" {
		path = "-"
	}
	resv := "-"
	if r := n.Reservation; r != nil {
		resv = fmt.Sprintf("%s, %d registered, held by %s", r.Type, len(r.Registrants), strings.Join(r.Holders, ","))
		if len(r.Holders) == 0 {
			resv = fmt.Sprintf("%s, %d registered", r.Type, len(r.Registrants))
		}
	}
	return []string{strconv.FormatUint(uint64(n.NSID), 10), n.Backend, config.Bytes(n.Size).String(),
		strconv.FormatUint(uint64(n.BlockSize), 10), access, strconv.FormatUint(uint64(n.ANAGroup), 10), resv, path, n.UUID}
}

// change makes a change and prints its Result: each step applied, then
// each key that takes effect at the next start. When the target made some
// steps before failing, those are printed before the error is returned.
// saves is false for a reload, which never writes the file.
func (o *ctlOptions) change(cmd *cobra.Command, saves bool, do func(ctx context.Context, c *control.Client) (control.Result, error)) error {
	res, err := do(cmd.Context(), o.client())
	w := cmd.OutOrStdout()
	var ae *control.APIError
	if errors.As(err, &ae) {
		if o.json {
			control.EncodeJSON(w, ae.ErrorResponse)
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
		return control.EncodeJSON(w, res)
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
	if len(res.Applied) > 0 && !res.Persisted && saves {
		fmt.Fprintln(cmd.ErrOrStderr(), "note: the target runs without a configuration file; this change lasts until it stops (save it with: nvmeof-tgt config save)")
	}
	return nil
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
			return o.change(cmd, true, func(ctx context.Context, c *control.Client) (control.Result, error) {
				return c.AddSubsystem(ctx, req)
			})
		},
	}
	add.Flags().BoolVar(&req.AllowAnyHost, "allow-any-host", false, "let any host connect")
	add.Flags().StringArrayVar(&req.Hosts, "host", nil, "a host NQN allowed to connect (repeat for more)")
	add.Flags().StringVar(&req.Serial, "serial", "", "serial number (default: derived from the NQN)")
	add.Flags().StringVar(&req.Model, "model", "", "model number (default: nvmeof-tgt)")
	add.Flags().IntSliceVar(&req.Ports, "port", nil, "ID of a port that serves it (repeat for more; default: every port)")
	add.Flags().IntVar(&req.CNTLIDMin, "cntlid-min", 0, "lowest controller ID (default 1)")
	add.Flags().IntVar(&req.CNTLIDMax, "cntlid-max", 0, "highest controller ID (default 65519)")
	c.AddCommand(add, &cobra.Command{
		Use:   "ports NQN [PORTID...]",
		Short: "Set the ports that serve a subsystem (none: every port); hosts on a port taken away are disconnected",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ids, err := parseIDs(args[1:], "port ID")
			if err != nil {
				return err
			}
			return o.change(cmd, true, func(ctx context.Context, c *control.Client) (control.Result, error) {
				return c.SetSubsystemPorts(ctx, args[0], ids)
			})
		},
	}, &cobra.Command{
		Use:   "remove NQN",
		Short: "Remove a subsystem; its hosts are disconnected",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.change(cmd, true, func(ctx context.Context, c *control.Client) (control.Result, error) {
				return c.RemoveSubsystem(ctx, args[0])
			})
		},
	}, showCmd(o, "list", "List subsystems", cobra.NoArgs,
		func(ctx context.Context, c *control.Client, _ []string) ([]control.SubsystemStatus, error) {
			return c.Subsystems(ctx)
		},
		printSubsystems))
	return c
}

// usageError is a command line the CLI refuses itself, before asking the
// target: it exits as cobra's own usage errors do.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// parseIDs reads port IDs (or other small numbers) given as arguments.
func parseIDs(args []string, what string) ([]int, error) {
	out := make([]int, 0, len(args))
	for _, a := range args {
		n, err := strconv.Atoi(a)
		if err != nil || n < 1 {
			return nil, &usageError{fmt.Errorf("%s %q: want a number from 1", what, a)}
		}
		out = append(out, n)
	}
	return out, nil
}

// parseSize reads a size as the configuration file writes it.
func parseSize(s string) (control.Size, error) {
	b, err := config.ParseBytes(s)
	return control.Size(b), err
}

// parseNSID reads an NSID argument; 0 is the target's to refuse.
func parseNSID(s string) (uint32, error) {
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return 0, &usageError{fmt.Errorf("NSID %q: want a number from 1", s)}
	}
	return uint32(n), nil
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
					return &usageError{fmt.Errorf("--size: %w", err)}
				}
				req.Size = s
			}
			return o.change(cmd, true, func(ctx context.Context, c *control.Client) (control.Result, error) {
				return c.AddNamespace(ctx, args[0], req)
			})
		},
	}
	add.Flags().Uint32Var(&req.NSID, "nsid", 0, "namespace ID, from 1")
	add.MarkFlagRequired("nsid")
	add.Flags().StringVar(&req.Backend, "backend", "", "memory, file, block or rbd (default: rbd with --pool or --image, else from --path)")
	add.Flags().StringVar(&req.Path, "path", "", "file or block device")
	add.Flags().StringVar(&size, "size", "", "size, e.g. 1GiB: required for memory; for a file, the size to create or grow to; for rbd, the size to create a missing image with")
	add.Flags().StringVar(&req.Pool, "pool", "", "rbd: the image's pool")
	add.Flags().StringVar(&req.Image, "image", "", "rbd: the image")
	add.Flags().StringVar(&req.CephConf, "ceph-conf", "", "rbd: the cluster's configuration file (default "+limits.RBDCephConf+"; on a gateway of a group, its gateway_group.ceph_conf, the only one taken)")
	add.Flags().StringVar(&req.Client, "client", "", "rbd: the Ceph client name (default "+limits.RBDClient+"; on a gateway of a group, its gateway_group.client, the only one taken)")
	add.Flags().Uint32Var(&req.BlockSize, "block-size", 0, "512 or 4096 (default 512; a block device uses its own)")
	add.Flags().StringVar(&req.UUID, "uuid", "", "namespace UUID (default: derived from the NQN and NSID)")
	add.Flags().StringVar(&req.NGUID, "nguid", "", `NGUID, 32 hex digits or "none" (default: derived from the UUID)`)
	add.Flags().StringVar(&req.EUI64, "eui64", "", "EUI-64, 16 hex digits (default: none)")
	add.Flags().Uint32Var(&req.ANAGroup, "ana-group", 0, "ANA group, 1..128 (default 1; on a gateway of a group: the gateway group with the fewest namespaces)")
	add.Flags().BoolVar(&req.ReadOnly, "read-only", false, "refuse writes")
	add.Flags().BoolVar(&req.BufferedIO, "buffered-io", false, "use the page cache instead of O_DIRECT")
	add.Flags().StringArrayVar(&req.Hosts, "host", nil, "mask: only this host NQN sees the namespace (repeat for more; default: every host the subsystem allows)")

	var force bool
	resize := &cobra.Command{
		Use:   "resize NQN NSID SIZE",
		Short: "Resize a file, block or rbd namespace; hosts are told of the new size",
		Long: "Resize a file, block or rbd namespace; hosts are told of the new size. An RBD image is resized.\n" +
			"Shrinking loses the data past the new end and needs --force. SIZE 0 reads the backend's size again\n" +
			"(a file's length after it grew, a block device's whole size after lvextend; an RBD image's size\n" +
			"is followed without it, as rbd resize changes it).",
		Args: cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			nsid, err := parseNSID(args[1])
			if err != nil {
				return err
			}
			s, err := parseSize(args[2])
			if err != nil {
				return &usageError{fmt.Errorf("size: %w", err)}
			}
			return o.change(cmd, true, func(ctx context.Context, c *control.Client) (control.Result, error) {
				return c.ResizeNamespace(ctx, args[0], nsid, control.ResizeRequest{Size: &s, Force: force})
			})
		},
	}
	resize.Flags().BoolVar(&force, "force", false, "allow the namespace to shrink")

	c.AddCommand(add, resize, nsHostCmd(o), nsQoSCmd(o), &cobra.Command{
		Use:   "ana-group NQN NSID GROUP",
		Short: "Move a namespace to another ANA group; hosts stay connected and re-read the ANA log",
		Args:  cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			nsid, err := parseNSID(args[1])
			if err != nil {
				return err
			}
			g, err := strconv.ParseUint(args[2], 10, 32)
			if err != nil {
				return &usageError{fmt.Errorf("ANA group %q: want a number", args[2])}
			}
			return o.change(cmd, true, func(ctx context.Context, c *control.Client) (control.Result, error) {
				return c.SetANAGroup(ctx, args[0], nsid, uint32(g))
			})
		},
	}, &cobra.Command{
		Use:   "remove NQN NSID",
		Short: "Remove a namespace; hosts see it go",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			nsid, err := parseNSID(args[1])
			if err != nil {
				return err
			}
			return o.change(cmd, true, func(ctx context.Context, c *control.Client) (control.Result, error) {
				return c.RemoveNamespace(ctx, args[0], nsid)
			})
		},
	}, showCmd(o, "list NQN", "List the namespaces of a subsystem", cobra.ExactArgs(1),
		func(ctx context.Context, c *control.Client, args []string) ([]control.NamespaceStatus, error) {
			return c.Namespaces(ctx, args[0])
		},
		func(w io.Writer, nss []control.NamespaceStatus) {
			var rows [][]string
			for _, n := range nss {
				rows = append(rows, namespaceRow(n))
			}
			table(w, "", namespaceHeader, rows)
		}))
	return c
}

// nsHostCmd changes a namespace's mask.
func nsHostCmd(o *ctlOptions) *cobra.Command {
	c := &cobra.Command{Use: "host", Short: "Show a masked namespace to a host, or hide it: live, the host adds or removes the disk"}
	for _, sub := range []struct {
		use, short string
		do         func(c *control.Client, ctx context.Context, nqn string, nsid uint32, host string) (control.Result, error)
	}{
		{"add NQN NSID HOSTNQN", "Show a namespace with a mask to one more host", (*control.Client).AddNamespaceHost},
		{"remove NQN NSID HOSTNQN", "Hide a namespace from a host of its mask (not the last one)", (*control.Client).RemoveNamespaceHost},
	} {
		c.AddCommand(&cobra.Command{
			Use:   sub.use,
			Short: sub.short,
			Args:  cobra.ExactArgs(3),
			RunE: func(cmd *cobra.Command, args []string) error {
				nsid, err := parseNSID(args[1])
				if err != nil {
					return err
				}
				return o.change(cmd, true, func(ctx context.Context, c *control.Client) (control.Result, error) {
					return sub.do(c, ctx, args[0], nsid, args[2])
				})
			},
		})
	}
	return c
}

// nsQoSCmd sets a namespace's QoS limits.
func nsQoSCmd(o *ctlOptions) *cobra.Command {
	var (
		req    control.QoSRequest
		bw     [3]string
		host   string
		remove bool
	)
	c := &cobra.Command{
		Use:   "qos NQN NSID [--iops N] [--read-iops N] [--write-iops N] [--bw SIZE] [--read-bw SIZE] [--write-bw SIZE] [--host HOSTNQN|default [--remove]]",
		Short: "Set a namespace's QoS limits, live: all hosts together, or one host's (--host), or each host's default (--host default)",
		Long: "Set a namespace's QoS limits, live. The limits given replace every limit of their scope; none given\n" +
			"removes them. Bandwidths are bytes per second with units (100MB, 1GiB). A command over a limit\n" +
			"waits at the target, never fails. With --host, the limits are that host's instead of the default\n" +
			"(--host default); --remove gives the host the default again.",
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			nsid, err := parseNSID(args[1])
			if err != nil {
				return err
			}
			for i, dst := range []*control.Size{&req.BW, &req.ReadBW, &req.WriteBW} {
				if bw[i] == "" {
					continue
				}
				if *dst, err = parseSize(bw[i]); err != nil {
					return &usageError{fmt.Errorf("%s: %w", []string{"--bw", "--read-bw", "--write-bw"}[i], err)}
				}
			}
			if remove && host == "" {
				return &usageError{errors.New("--remove takes --host")}
			}
			return o.change(cmd, true, func(ctx context.Context, c *control.Client) (control.Result, error) {
				switch {
				case remove:
					return c.RemoveNamespaceHostQoS(ctx, args[0], nsid, host)
				case host != "":
					return c.SetNamespaceHostQoS(ctx, args[0], nsid, host, req)
				}
				return c.SetNamespaceQoS(ctx, args[0], nsid, req)
			})
		},
	}
	c.Flags().Uint64Var(&req.IOPS, "iops", 0, "commands per second: reads, writes, Write Zeroes, Dataset Management")
	c.Flags().Uint64Var(&req.ReadIOPS, "read-iops", 0, "reads per second")
	c.Flags().Uint64Var(&req.WriteIOPS, "write-iops", 0, "writes, Write Zeroes and Dataset Management per second")
	c.Flags().StringVar(&bw[0], "bw", "", "bytes of reads and writes per second, e.g. 100MB")
	c.Flags().StringVar(&bw[1], "read-bw", "", "bytes read per second")
	c.Flags().StringVar(&bw[2], "write-bw", "", "bytes written per second")
	c.Flags().StringVar(&host, "host", "", `a host's own limits, or "default" for every host without its own`)
	c.Flags().BoolVar(&remove, "remove", false, "remove the host's own limits (with --host)")
	return c
}

// qosText shows a set of limits, "-" for none.
func qosText(q control.QoSRequest) string {
	var parts []string
	for _, kv := range []struct {
		k string
		v uint64
		b bool
	}{{"iops", q.IOPS, false}, {"read_iops", q.ReadIOPS, false}, {"write_iops", q.WriteIOPS, false},
		{"bw", uint64(q.BW), true}, {"read_bw", uint64(q.ReadBW), true}, {"write_bw", uint64(q.WriteBW), true}} {
		switch {
		case kv.v == 0:
		case kv.b:
			parts = append(parts, kv.k+"="+config.Bytes(kv.v).String()+"/s")
		default:
			parts = append(parts, kv.k+"="+strconv.FormatUint(kv.v, 10))
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}

// printAccess is the table of namespaces with a mask or QoS.
func printAccess(w io.Writer, subs []control.SubsystemStatus) {
	var rows [][]string
	for _, s := range subs {
		for _, n := range s.Namespaces {
			if len(n.Hosts) == 0 && n.QoS == nil {
				continue
			}
			hosts := "all"
			if len(n.Hosts) > 0 {
				hosts = strings.Join(n.Hosts, ",")
			}
			limit, perHost, held, waited := "-", "-", "-", "-"
			if q := n.QoS; q != nil {
				limit, perHost = qosText(q.Limits), qosText(q.PerHost)
				var own []string
				for _, h := range q.Hosts {
					if h.Limits != nil {
						own = append(own, h.NQN+": "+qosText(*h.Limits))
					}
				}
				if len(own) > 0 {
					perHost += "; " + strings.Join(own, "; ")
				}
				held = strconv.Itoa(q.Held) + "/" + strconv.FormatUint(q.HeldTotal, 10)
				waited = time.Duration(q.WaitedSeconds * float64(time.Second)).Round(time.Millisecond).String()
			}
			rows = append(rows, []string{s.NQN, strconv.FormatUint(uint64(n.NSID), 10), hosts, limit, perHost, held, waited})
		}
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintln(w)
	table(w, "NAMESPACE MASKS AND QOS", []string{"SUBSYSTEM", "NSID", "HOSTS", "QOS", "QOS PER HOST", "HELD NOW/ALL", "WAITED"}, rows)
}

func hostCmd(o *ctlOptions) *cobra.Command {
	c := &cobra.Command{Use: "host", Short: "Allow, remove or list the hosts of a subsystem"}
	c.AddCommand(&cobra.Command{
		Use:   "add NQN HOSTNQN",
		Short: "Allow a host to connect to a subsystem",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.change(cmd, true, func(ctx context.Context, c *control.Client) (control.Result, error) {
				return c.AddHost(ctx, args[0], control.HostRequest{NQN: args[1]})
			})
		},
	}, &cobra.Command{
		Use:   "remove NQN HOSTNQN",
		Short: "Remove a host from a subsystem; its controllers are disconnected",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.change(cmd, true, func(ctx context.Context, c *control.Client) (control.Result, error) {
				return c.RemoveHost(ctx, args[0], args[1])
			})
		},
	}, showCmd(o, "list NQN", "List the hosts allowed on a subsystem, one per line", cobra.ExactArgs(1),
		func(ctx context.Context, c *control.Client, args []string) ([]control.HostInfo, error) {
			return c.Hosts(ctx, args[0])
		},
		func(w io.Writer, hosts []control.HostInfo) {
			for _, h := range hosts {
				fmt.Fprintln(w, h.NQN)
			}
		}))
	return c
}

func portCmd(o *ctlOptions) *cobra.Command {
	c := &cobra.Command{Use: "port", Short: "Add, remove or list the ports the target listens on"}
	portFlags := func(c *cobra.Command, p *control.PortRequest) {
		c.Flags().StringVar(&p.Transport, "transport", "rdma", "rdma or tcp")
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
			return o.change(cmd, true, func(ctx context.Context, c *control.Client) (control.Result, error) {
				return c.AddPort(ctx, addReq)
			})
		},
	}
	portFlags(add, &addReq)
	add.Flags().IntVar(&addReq.ID, "id", 0, "NVMe port ID, 1..65519 (default: one more than the highest)")
	remove := &cobra.Command{
		Use:   "remove --address A",
		Short: "Stop listening on a port; the controllers connected through it are disconnected",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.change(cmd, true, func(ctx context.Context, c *control.Client) (control.Result, error) {
				return c.RemovePort(ctx, rmReq)
			})
		},
	}
	portFlags(remove, &rmReq)
	ana := &cobra.Command{Use: "ana", Short: "Show or set the ANA state of each group through a port"}
	ana.AddCommand(showCmd(o, "show PORTID", "Show the state of each ANA group through a port", cobra.ExactArgs(1),
		func(ctx context.Context, c *control.Client, args []string) (map[string]string, error) {
			ids, err := parseIDs(args, "port ID")
			if err != nil {
				return nil, err
			}
			return c.PortANA(ctx, ids[0])
		},
		func(w io.Writer, groups map[string]string) {
			for _, g := range strings.Fields(anaStates(groups)) {
				id, state, _ := strings.Cut(g, "=")
				fmt.Fprintf(w, "%s\t%s\n", id, state)
			}
		}), &cobra.Command{
		Use:   "set PORTID GROUP STATE",
		Short: "Set an ANA group's state through a port (optimized, non-optimized, inaccessible, persistent-loss, change); hosts stay connected",
		Args:  cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			ids, err := parseIDs(args[:1], "port ID")
			if err != nil {
				return err
			}
			return o.change(cmd, true, func(ctx context.Context, c *control.Client) (control.Result, error) {
				return c.SetANAState(ctx, ids[0], args[1], args[2])
			})
		},
	})
	c.AddCommand(add, remove, ana, showCmd(o, "list", "List ports", cobra.NoArgs,
		func(ctx context.Context, c *control.Client, _ []string) ([]control.PortStatus, error) {
			return c.Ports(ctx)
		},
		printPorts))
	return c
}

// groupCmd is what an operator does to a gateway group through one of its
// gateways.
func groupCmd(o *ctlOptions) *cobra.Command {
	c := &cobra.Command{Use: "group", Short: "Act on the gateway group this gateway belongs to"}
	c.AddCommand(&cobra.Command{
		Use:   "fence ID",
		Short: "Fence a dead gateway on your word: blocklist the clients its lease names and take its ANA group over",
		Long: `Fence a dead gateway on your word. A gateway that died before the others saw it
holding its lease lock (they all restarted meanwhile) cannot be fenced by them:
the addresses its lease record names are anyone's word. Once you know it is
down, this blocklists them and the gateway's ANA group is taken over. It
refuses a gateway that holds its lease, or whose lease names a live gateway's
address. Run it again after this gateway restarts, if the other is still down.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := strconv.Atoi(args[0])
			if err != nil {
				return &usageError{fmt.Errorf("gateway %q: want a number", args[0])}
			}
			return o.change(cmd, false, func(ctx context.Context, c *control.Client) (control.Result, error) {
				return c.FenceGateway(ctx, id)
			})
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
			return o.change(cmd, false, func(ctx context.Context, c *control.Client) (control.Result, error) {
				return c.Reload(ctx)
			})
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
			y, err := o.client().Config(cmd.Context())
			if err != nil {
				return err
			}
			cmd.OutOrStdout().Write(y)
			return nil
		},
	}
	o.addFlags(c, false)
	return c
}
