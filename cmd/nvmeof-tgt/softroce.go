package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/vishvananda/netlink"
)

// softRoCECmd sets up Soft-RoCE (rdma_rxe) over netlink, for test rigs and
// machines without an RDMA NIC: rxe needs a netdev with an address; rdma_cm
// cannot route over rxe on "lo", so a dummy netdev is created when asked.
func softRoCECmd() *cobra.Command {
	var netdev, rxe, addr string
	var dummy bool
	c := &cobra.Command{
		Use:   "softroce",
		Short: "Set up or remove a Soft-RoCE (rxe) device",
	}
	add := &cobra.Command{
		Use:   "add",
		Short: "Create an rxe device on a netdev (optionally a new dummy netdev with an address)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return softRoCEAdd(netdev, rxe, addr, dummy)
		},
	}
	add.Flags().StringVar(&netdev, "netdev", "", "network device to bind rxe to (required)")
	add.Flags().StringVar(&rxe, "name", "rxe0", "name of the RDMA device")
	add.Flags().StringVar(&addr, "address", "", "address with prefix to add to the netdev, e.g. 10.255.0.1/32")
	add.Flags().BoolVar(&dummy, "dummy", false, "create the netdev as a dummy device if it does not exist")
	add.MarkFlagRequired("netdev")
	del := &cobra.Command{
		Use:   "del",
		Short: "Remove an rxe device",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			l, err := netlink.RdmaLinkByName(rxe)
			if err != nil {
				return fmt.Errorf("rdma link %s: %w", rxe, err)
			}
			return netlink.RdmaLinkDel(l.Attrs.Name)
		},
	}
	del.Flags().StringVar(&rxe, "name", "rxe0", "name of the RDMA device")
	c.AddCommand(add, del)
	return c
}

func softRoCEAdd(netdev, rxe, addr string, dummy bool) error {
	link, err := netlink.LinkByName(netdev)
	var notFound netlink.LinkNotFoundError
	if errors.As(err, &notFound) && dummy {
		if err := netlink.LinkAdd(&netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: netdev}}); err != nil {
			return fmt.Errorf("create dummy %s: %w", netdev, err)
		}
		link, err = netlink.LinkByName(netdev)
	}
	if err != nil {
		return fmt.Errorf("netdev %s: %w", netdev, err)
	}
	if addr != "" {
		a, err := netlink.ParseAddr(addr)
		if err != nil {
			return fmt.Errorf("address %q: %w", addr, err)
		}
		if err := netlink.AddrReplace(link, a); err != nil {
			return fmt.Errorf("add %s to %s: %w", addr, netdev, err)
		}
	}
	if err := netlink.LinkSetUp(link); err != nil {
		return fmt.Errorf("set %s up: %w", netdev, err)
	}
	if _, err := netlink.RdmaLinkByName(rxe); err == nil {
		fmt.Fprintf(os.Stderr, "rdma link %s exists\n", rxe)
		return nil
	}
	if err := netlink.RdmaLinkAdd(rxe, "rxe", netdev); err != nil {
		return fmt.Errorf("rdma link add %s type rxe netdev %s (is rdma_rxe loaded?): %w", rxe, netdev, err)
	}
	fmt.Printf("%s: rxe on %s\n", rxe, netdev)
	return nil
}
