package main

import (
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nvmeof-tgt/nvmeof-tgt/blockdev"
	"github.com/nvmeof-tgt/nvmeof-tgt/config"
	"github.com/nvmeof-tgt/nvmeof-tgt/control"
	"github.com/nvmeof-tgt/nvmeof-tgt/control/group"
	"github.com/nvmeof-tgt/nvmeof-tgt/control/group/rados"
)

// unservedGroup is the problem of a gateway_group this binary cannot join:
// the default build has no librados (nvmeof-tgt-rbd has it).
func unservedGroup(cfg *config.Config) []error {
	if rados.Supported || cfg == nil || !cfg.GatewayGroup.Enabled() {
		return nil
	}
	return []error{&config.FieldError{Key: "gateway_group", Msg: "this nvmeof-tgt is built without librados; nvmeof-tgt-rbd serves gateway groups"}}
}

// unserved is what this binary cannot serve of cfg: rbd namespaces and a
// gateway group without librbd and librados.
func unserved(cfg *config.Config) []error {
	return append(unservedBackends(cfg), unservedGroup(cfg)...)
}

// groupOptions connects a gateway to its group's pool. fenced is told when
// another gateway blocklisted this one. The store is nil without a group.
func groupOptions(cfg *config.Config, log *slog.Logger, fenced func(error)) (*control.GroupOptions, group.Store, error) {
	if !cfg.GatewayGroup.Enabled() {
		return nil, nil, nil
	}
	st, err := rados.Open(cfg.GatewayGroup, log)
	if err != nil {
		return nil, nil, err
	}
	return &control.GroupOptions{
		Store: st,
		// The data path's clients are fenced with the group's.
		Addrs: func() []string {
			var out []string
			for _, a := range blockdev.RBDClientAddrs() {
				out = append(out, rados.ParseAddrs(a)...)
			}
			return out
		},
		Barrier:   blockdev.RBDWaitForLatestOSDMap,
		Fenced:    fenced,
		Unsettled: blockdev.RBDUnsettled,
	}, st, nil
}

// printGroup shows a gateway's view of its group: the state's version and
// health, each gateway's lease, and who serves which ANA group.
func printGroup(w io.Writer, g *control.GroupStatus) {
	fmt.Fprintf(w, "GATEWAY GROUP %s (pool %s, object %s): gateway %d, state version %d, %d failovers, %d conflicts\n",
		g.Name, g.Pool, rados.StateObject(g.Name), g.ID, g.Version, g.Failovers, g.Conflicts)
	if g.Error != "" {
		fmt.Fprintf(w, "state unreadable (serving what was, changes refused): %s\n", g.Error)
	}
	if g.Unread != "" {
		fmt.Fprintf(w, "state unread since a change (I/O refused, every group reported inaccessible): %s\n", g.Unread)
	}
	if g.Idle {
		fmt.Fprintln(w, "idle: no command runs here; the other gateways serve this one's group")
	}
	if g.LeaseWithheld {
		fmt.Fprintln(w, "lease withheld: a write given up on may still land; the other gateways fence this one before they serve its group")
	}
	if len(g.PrevOwed) > 0 {
		fmt.Fprintf(w, "not serving: waiting for the clients of this gateway's previous incarnation on other machines to be blocklisted: %s\n", strings.Join(g.PrevOwed, " "))
	}
	for _, what := range slices.Sorted(maps.Keys(g.Degraded)) {
		fmt.Fprintf(w, "not served here (the rest is): %s: %s\n", what, g.Degraded[what])
	}
	if g.Fenced {
		fmt.Fprintln(w, "this gateway was fenced by another: restart it")
	}
	var rows [][]string
	for _, m := range g.Members {
		health := "alive"
		switch {
		case m.Idle:
			health = "idle"
		case m.Unverified && !m.Alive && !m.Fenced && !m.Stopped:
			health = "dead, unverified (group fence ID)"
		case m.Stopped:
			health = "stopped"
		case m.Fenced:
			health = "fenced"
		case !m.Alive:
			health = "dead"
		}
		id := strconv.Itoa(m.ID)
		if m.Self {
			id += " (this)"
		}
		var owns []string
		for grp, owner := range g.Owners {
			if owner == m.ID {
				owns = append(owns, grp)
			}
		}
		slices.SortFunc(owns, func(a, b string) int { x, _ := strconv.Atoi(a); y, _ := strconv.Atoi(b); return x - y })
		rows = append(rows, []string{id, health, m.LeaseAge.Round(time.Millisecond).String(), strings.Join(owns, ","), strings.Join(m.Listeners, ", ")})
	}
	table(w, "GATEWAYS", []string{"ID", "HEALTH", "LEASE AGE", "ANA GROUPS", "LISTENERS"}, rows)
}
