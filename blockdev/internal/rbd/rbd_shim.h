// Declarations shared by rbd.go and rbd_shim.c.
#ifndef NVT_RBD_SHIM_H
#define NVT_RBD_SHIM_H

#include <pthread.h>
#include <stdint.h>
#include <rados/librados.h>
#include <rbd/librbd.h>

// Asynchronous operations (nvt_rbd_submit).
enum {
	NVT_RBD_READ = 0,
	NVT_RBD_WRITE = 1,
	NVT_RBD_FLUSH = 2,
	NVT_RBD_DISCARD = 3,
	NVT_RBD_WRITE_ZEROES = 4,
};

// One finished operation: its slot and librbd's return value (bytes, or
// -errno).
typedef struct {
	uint32_t slot;
	uint32_t pad;
	int64_t res;
} nvt_rbd_done;

typedef struct nvt_rbd_queue nvt_rbd_queue;

// The callback argument of a slot's operation.
typedef struct {
	nvt_rbd_queue *q;
	uint32_t slot;
} nvt_rbd_arg;

// A queue of finished operations: librbd's threads push (under mu, among
// themselves), one owner pops without a lock. tail and armed are read and
// written atomically from Go as well as from C.
struct nvt_rbd_queue {
	uint32_t tail;     // entries pushed; published after the entry is written
	int32_t armed;     // the owner is about to sleep: signal evfd
	int64_t inflight;  // operations whose callback has not returned
	uint32_t mask;     // entries - 1, a power of two minus one
	int32_t evfd;      // -1: none
	nvt_rbd_arg *args; // by slot
	nvt_rbd_done *done;
	pthread_mutex_t mu;
};

nvt_rbd_queue *nvt_rbd_queue_new(uint32_t entries, int evfd);
void nvt_rbd_queue_free(nvt_rbd_queue *q);
int64_t nvt_rbd_queue_inflight(nvt_rbd_queue *q);
int nvt_rbd_submit(nvt_rbd_queue *q, rbd_image_t img, int op, uint32_t slot, void *buf, uint64_t off, uint64_t len);
// nvt_rbd_post delivers a completion as librbd's callback does (tests).
void nvt_rbd_post(nvt_rbd_queue *q, uint32_t slot, int64_t res);

// A flag librbd's update callback raises, with a wake-up on fd.
typedef struct {
	int32_t changed;
	int32_t fd;
} nvt_rbd_watch;

int nvt_rbd_update_watch(rbd_image_t img, nvt_rbd_watch *w, uint64_t *handle);

// The steps of nvt_rados_connect, for its error.
enum {
	NVT_STEP_CREATE = 1,
	NVT_STEP_CONF = 2,
	NVT_STEP_SET = 3,
	NVT_STEP_CONNECT = 4,
};

int nvt_rados_configure(rados_t *out, const char *conf, const char *name, const char *timeout_s, const char *osd_timeout_s, int *step);
int nvt_rados_connect(rados_t *out, const char *conf, const char *name, const char *timeout_s, const char *osd_timeout_s, int *step);

#endif
