package fabric

import (
	"fmt"
	"log/slog"

	"github.com/nvmeof-tgt/nvmeof-tgt/nvme"
)

// checkNQNs applies the NQN rule (nvme.CheckNQN) to a new subsystem and
// its hosts, and warns about names Linux takes but the spec does not
// recommend, since other initiators may refuse them.
func checkNQNs(c SubsystemConfig, log *slog.Logger) error {
	if err := nvme.CheckSubsystemNQN(c.NQN); err != nil {
		return err
	}
	for i, h := range c.Hosts {
		if err := nvme.CheckNQN(h); err != nil {
			return fmt.Errorf("hosts[%d]: %w", i, err)
		}
	}
	if !nvme.IsSpecNQN(c.NQN) {
		log.Warn("subsystem NQN is not of the form nqn.yyyy-mm.reverse-domain:name", "subnqn", c.NQN)
	}
	for _, h := range c.Hosts {
		if !nvme.IsSpecNQN(h) {
			log.Warn("host NQN is not of the form nqn.yyyy-mm.reverse-domain:name", "subnqn", c.NQN, "hostnqn", h)
		}
	}
	return nil
}
