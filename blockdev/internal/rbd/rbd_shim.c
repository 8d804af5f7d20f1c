//go:build linux && cgo && rbd

// Definitions for rbd_shim.h. The build line keeps the file out of builds
// without the rbd tag, where the package has no cgo at all.

#include "rbd_shim.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

// nvt_rados_configure makes a client (name: client.<id>) from the
// configuration file conf, with connecting and monitor operations bounded
// by timeout_s seconds and OSD operations by osd_timeout_s (librados'
// Objecter cancels one past it with -ETIMEDOUT). The cache is off: every write a completion
// acknowledges is on the OSDs, and two gateways (or two of our own queues)
// never see each other's stale data. Partial discards are not skipped
// (librbd's default skips a discard that covers no whole object): a
// deallocated range then reads back as zeroes, which the namespace reports
// (DLFEAT). On failure *step says what failed and nothing is left open.
int nvt_rados_configure(rados_t *out, const char *conf, const char *name, const char *timeout_s, const char *osd_timeout_s, int *step) {
	rados_t c;
	int r;
	*step = NVT_STEP_CREATE;
	if ((r = rados_create2(&c, "ceph", name, 0)) < 0) return r;
	*step = NVT_STEP_CONF;
	if ((r = rados_conf_read_file(c, conf)) < 0) goto fail;
	*step = NVT_STEP_SET;
	if ((r = rados_conf_set(c, "client_mount_timeout", timeout_s)) < 0) goto fail;
	if ((r = rados_conf_set(c, "rados_mon_op_timeout", timeout_s)) < 0) goto fail;
	if ((r = rados_conf_set(c, "rados_osd_op_timeout", osd_timeout_s)) < 0) goto fail;
	if ((r = rados_conf_set(c, "rbd_cache", "false")) < 0) goto fail;
	if ((r = rados_conf_set(c, "rbd_skip_partial_discard", "false")) < 0) goto fail;
	*out = c;
	return 0;
fail:
	rados_shutdown(c);
	return r;
}

// nvt_rados_connect makes a client as nvt_rados_configure does and
// connects it.
int nvt_rados_connect(rados_t *out, const char *conf, const char *name, const char *timeout_s, const char *osd_timeout_s, int *step) {
	rados_t c;
	int r;
	if ((r = nvt_rados_configure(&c, conf, name, timeout_s, osd_timeout_s, step)) < 0) return r;
	*step = NVT_STEP_CONNECT;
	if ((r = rados_connect(c)) < 0) {
		rados_shutdown(c);
		return r;
	}
	*out = c;
	return 0;
}

nvt_rbd_queue *nvt_rbd_queue_new(uint32_t entries, int evfd) {
	nvt_rbd_queue *q = calloc(1, sizeof(*q));
	if (!q) return NULL;
	q->args = calloc(entries, sizeof(*q->args));
	q->done = calloc(entries, sizeof(*q->done));
	if (!q->args || !q->done || pthread_mutex_init(&q->mu, NULL) != 0) {
		free(q->args);
		free(q->done);
		free(q);
		return NULL;
	}
	for (uint32_t i = 0; i < entries; i++) {
		q->args[i].q = q;
		q->args[i].slot = i;
	}
	q->mask = entries - 1;
	q->evfd = evfd;
	return q;
}

void nvt_rbd_queue_free(nvt_rbd_queue *q) {
	pthread_mutex_destroy(&q->mu);
	free(q->args);
	free(q->done);
	free(q);
}

int64_t nvt_rbd_queue_inflight(nvt_rbd_queue *q) {
	return atomic_load((_Atomic int64_t *)&q->inflight);
}

// nvt_rbd_push puts slot's result on q and wakes an owner that armed q.
// It does as little as it can (librbd's threads are its I/O path): the
// result into the ring, and a wake-up only when the owner sleeps.
static void nvt_rbd_push(nvt_rbd_queue *q, uint32_t slot, int64_t res) {
	pthread_mutex_lock(&q->mu);
	uint32_t t = atomic_load_explicit((_Atomic uint32_t *)&q->tail, memory_order_relaxed);
	q->done[t & q->mask].slot = slot;
	q->done[t & q->mask].res = res;
	// Sequentially consistent, as the owner's store to armed and load of
	// tail (Arm): one of the two sides sees the other.
	atomic_store((_Atomic uint32_t *)&q->tail, t + 1);
	pthread_mutex_unlock(&q->mu);
	if (q->evfd >= 0 && atomic_exchange((_Atomic int32_t *)&q->armed, 0)) {
		uint64_t one = 1;
		ssize_t n = write(q->evfd, &one, sizeof(one));
		(void)n; // EAGAIN: the counter is full, the owner is awake anyway
	}
	// The last touch of q: the owner frees it only once this is 0.
	atomic_fetch_sub((_Atomic int64_t *)&q->inflight, 1);
}

// nvt_rbd_complete runs on a librbd thread when an operation finishes.
static void nvt_rbd_complete(rbd_completion_t c, void *arg) {
	nvt_rbd_arg *a = arg;
	int64_t res = rbd_aio_get_return_value(c);
	rbd_aio_release(c);
	nvt_rbd_push(a->q, a->slot, res);
}

void nvt_rbd_post(nvt_rbd_queue *q, uint32_t slot, int64_t res) {
	atomic_fetch_add((_Atomic int64_t *)&q->inflight, 1);
	nvt_rbd_push(q, slot, res);
}

// nvt_rbd_submit starts op on img for slot. librbd's asynchronous calls
// report every failure through the completion, after they return 0; a
// negative return means nothing was started.
int nvt_rbd_submit(nvt_rbd_queue *q, rbd_image_t img, int op, uint32_t slot, void *buf, uint64_t off, uint64_t len) {
	rbd_completion_t c;
	int r = rbd_aio_create_completion(&q->args[slot], nvt_rbd_complete, &c);
	if (r < 0) return r;
	atomic_fetch_add((_Atomic int64_t *)&q->inflight, 1);
	switch (op) {
	case NVT_RBD_READ:
		r = rbd_aio_read(img, off, len, buf, c);
		break;
	case NVT_RBD_WRITE:
		r = rbd_aio_write(img, off, len, buf, c);
		break;
	case NVT_RBD_FLUSH:
		r = rbd_aio_flush(img, c);
		break;
	case NVT_RBD_DISCARD:
		r = rbd_aio_discard(img, off, len, c);
		break;
	case NVT_RBD_WRITE_ZEROES:
		r = rbd_aio_write_zeroes(img, off, len, c, 0, 0);
		break;
	default:
		r = -EINVAL;
	}
	if (r < 0) {
		atomic_fetch_sub((_Atomic int64_t *)&q->inflight, 1);
		rbd_aio_release(c);
	}
	return r;
}

static void nvt_rbd_watch_cb(void *arg) {
	nvt_rbd_watch *w = arg;
	atomic_store((_Atomic int32_t *)&w->changed, 1);
	uint64_t one = 1;
	ssize_t n = write(w->fd, &one, sizeof(one));
	(void)n;
}

int nvt_rbd_update_watch(rbd_image_t img, nvt_rbd_watch *w, uint64_t *handle) {
	return rbd_update_watch(img, handle, nvt_rbd_watch_cb, w);
}
