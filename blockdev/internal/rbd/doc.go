// Package rbd is a narrow Go API over librados and librbd for blockdev's rbd
// backend: connecting to a cluster, creating, opening, sizing and watching
// images, their blocking I/O for the namespace workers, and their
// asynchronous I/O on a Queue whose completions its owner reaps by polling.
//
// It is one of the two cgo packages of the tree (rdma/internal/verbs is the
// other); its C is in rbd_shim.c and rbd_shim.h. It is built only with the
// build tag rbd (the nvmeof-tgt-rbd binary), so that the default build needs
// no Ceph libraries; without it the package is this file alone and blockdev
// refuses the rbd backend.
//
// Completions never call Go: librbd runs a C callback on one of its own
// threads, which writes the result into its Queue's ring in C memory and
// signals the owner's eventfd only when the owner is about to sleep (Arm).
// The owner reads the ring with atomic loads, without a cgo call.
package rbd
