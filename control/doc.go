// Package control keeps a target's running configuration and changes it
// while hosts are connected: at start, through the management API, and on
// reload.
//
// The running configuration is one config.Config, the model the API, reload
// and persistence share. A change is a whole new config.Config: plan
// compares it with the running one and returns the steps that turn one into
// the other, and apply runs them against the fabric target. The running
// configuration follows each step that succeeded, so it is always what the
// target serves. Starting is the same path, from an empty configuration.
package control
