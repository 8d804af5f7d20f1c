// Package rados keeps a gateway group's objects in a RADOS pool: a
// group.Store over go-ceph's librados binding. It is built only with the
// build tag rbd (the nvmeof-tgt-rbd binary, which links librados anyway);
// without it Open returns ErrNotSupported, so that the default build needs
// no Ceph library.
package rados

import "errors"

// ErrNotSupported is Open in a build without librados.
var ErrNotSupported = errors.New("gateway groups need the rbd build (nvmeof-tgt-rbd), which links librados")
