package main

import (
	"fmt"

	"github.com/nvmeof-tgt/nvmeof-tgt/blockdev"
	"github.com/nvmeof-tgt/nvmeof-tgt/config"
)

// unservedBackends are the problems of cfg's namespaces whose backend this
// binary cannot serve: rbd ones in a build without librbd (the default
// build; nvmeof-tgt-rbd has it). config cannot tell: it knows the file
// format, not the build.
func unservedBackends(cfg *config.Config) []error {
	if blockdev.RBDSupported || cfg == nil {
		return nil
	}
	var out []error
	for i, s := range cfg.Subsystems {
		for j, n := range s.Namespaces {
			if n.Backend == config.BackendRBD {
				out = append(out, &config.FieldError{Key: fmt.Sprintf("subsystems[%d].namespaces[%d].backend", i, j),
					Msg: "rbd: this nvmeof-tgt is built without librbd; nvmeof-tgt-rbd serves RBD images"})
			}
		}
	}
	return out
}
