//go:build linux && cgo

// Definitions for verbs_shim.h. The build line keeps the file out of builds
// without cgo or on other systems, where verbs_stub.go stands in.

#include "verbs_shim.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <poll.h>
#include <unistd.h>
#include <stdio.h>
#include <string.h>

/* librdmacm before rdma-core 52 sorts the ibv_device pointers of the device
 * list with a comparison that cuts their difference to an int (fixed by
 * "librdmacm: Fix an overflow bug in qsort comparison function"). Pointers
 * from different malloc arenas (libibverbs allocates them on whichever
 * thread refreshes the list) then sort wrongly, and its device sync takes
 * a live device for a removed one (new rdma_cm IDs on it fail with ENODEV)
 * or a removed one for live (its removal never completes). One arena keeps
 * them all in the main heap, close together; nothing on the I/O path
 * allocates. Runs before any thread exists. */
__attribute__((constructor)) static void nt_one_arena(void) {
	mallopt(M_ARENA_MAX, 1);
}

int nt_set_nonblock(int fd) {
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) return -errno;
	return 0;
}

// nt_post_send links n requests into one chain and posts it with one call.
// Returns 0, or -errno with *bad set to the index of the first failed request.
static int nt_post_send(struct ibv_qp *qp, nt_send_wr *w, int n, int *bad) {
	struct ibv_send_wr wr[NT_MAX_BATCH];
	struct ibv_send_wr *badwr = NULL;
	static const enum ibv_wr_opcode ops[] = {IBV_WR_SEND, IBV_WR_SEND_WITH_INV, IBV_WR_RDMA_WRITE, IBV_WR_RDMA_READ};
	if (n > NT_MAX_BATCH) n = NT_MAX_BATCH;
	memset(wr, 0, sizeof(wr[0]) * n);
	for (int i = 0; i < n; i++) {
		wr[i].wr_id = w[i].wr_id;
		wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
		wr[i].sg_list = (struct ibv_sge *)w[i].sge;
		wr[i].num_sge = w[i].num_sge;
		wr[i].opcode = ops[w[i].opcode & 3];
		wr[i].send_flags = ((w[i].flags & 1) ? IBV_SEND_SIGNALED : 0) | ((w[i].flags & 2) ? IBV_SEND_INLINE : 0);
		if (wr[i].opcode == IBV_WR_SEND_WITH_INV) wr[i].invalidate_rkey = w[i].inv_rkey;
		wr[i].wr.rdma.remote_addr = w[i].remote_addr;
		wr[i].wr.rdma.rkey = w[i].rkey;
	}
	int rc = ibv_post_send(qp, wr, &badwr);
	if (rc) { *bad = badwr ? (int)(badwr - wr) : 0; return rc > 0 ? -rc : rc; }
	return n;
}

// nt_recv_chain builds the receive work-request chain of w[0..n) in wr,
// which has room for NT_MAX_BATCH, and returns how many it holds.
static inline int nt_recv_chain(struct ibv_recv_wr *wr, nt_recv_wr *w, int n) {
	if (n > NT_MAX_BATCH) n = NT_MAX_BATCH;
	for (int i = 0; i < n; i++) {
		wr[i].wr_id = w[i].wr_id;
		wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
		wr[i].sg_list = (struct ibv_sge *)w[i].sge;
		wr[i].num_sge = w[i].num_sge;
	}
	return n;
}

// nt_recv_result turns a post's return into the shim's: n posted, or a
// negative errno with *bad the index of the first work request not posted.
static inline int nt_recv_result(int rc, struct ibv_recv_wr *wr, struct ibv_recv_wr *badwr, int n, int *bad) {
	if (rc) { *bad = badwr ? (int)(badwr - wr) : 0; return rc > 0 ? -rc : rc; }
	return n;
}

static int nt_post_recv(struct ibv_qp *qp, nt_recv_wr *w, int n, int *bad) {
	struct ibv_recv_wr wr[NT_MAX_BATCH];
	struct ibv_recv_wr *badwr = NULL;
	n = nt_recv_chain(wr, w, n);
	int rc = ibv_post_recv(qp, wr, &badwr); // before badwr is read
	return nt_recv_result(rc, wr, badwr, n, bad);
}

static int nt_post_srq_recv(struct ibv_srq *srq, nt_recv_wr *w, int n, int *bad) {
	struct ibv_recv_wr wr[NT_MAX_BATCH];
	struct ibv_recv_wr *badwr = NULL;
	n = nt_recv_chain(wr, w, n);
	int rc = ibv_post_srq_recv(srq, wr, &badwr); // before badwr is read
	return nt_recv_result(rc, wr, badwr, n, bad);
}

// nt_post_batch posts the shared receive queue's receives first (a buffer a
// response gives back is there before the response goes out), then every
// group's receives and sends, in chains of at most NT_MAX_BATCH, and records
// how many went in and the first error, for the SRQ and per group.
void nt_post_batch(nt_group *g, int ng, nt_send_wr *s, nt_recv_wr *r, nt_srq_post *sp, nt_recv_wr *sr) {
	sp->rc = 0; sp->posted = 0;
	for (uint32_t off = 0; off < sp->n;) {
		int bad = 0, rc;
		int n = sp->n - off < NT_MAX_BATCH ? (int)(sp->n - off) : NT_MAX_BATCH;
		if ((rc = nt_post_srq_recv(sp->srq, sr + off, n, &bad)) < 0) {
			sp->rc = rc; sp->posted += bad; break;
		}
		off += n; sp->posted += n;
	}
	for (int i = 0; i < ng; i++) {
		int bad = 0, rc;
		g[i].recv_rc = 0; g[i].recv_posted = 0;
		for (uint32_t off = 0; off < g[i].nrecv;) {
			int n = g[i].nrecv - off < NT_MAX_BATCH ? (int)(g[i].nrecv - off) : NT_MAX_BATCH;
			if ((rc = nt_post_recv(g[i].qp, r + g[i].recv_off + off, n, &bad)) < 0) {
				g[i].recv_rc = rc; g[i].recv_posted += bad; break;
			}
			off += n; g[i].recv_posted += n;
		}
		g[i].send_rc = 0; g[i].send_posted = 0;
		for (uint32_t off = 0; off < g[i].nsend;) {
			int n = g[i].nsend - off < NT_MAX_BATCH ? (int)(g[i].nsend - off) : NT_MAX_BATCH;
			if ((rc = nt_post_send(g[i].qp, s + g[i].send_off + off, n, &bad)) < 0) {
				g[i].send_rc = rc; g[i].send_posted += bad; break;
			}
			off += n; g[i].send_posted += n;
		}
	}
}

// Field offsets of the structures Go mirrors, in the order cFieldOffsets lists them.
static const size_t nt_offsets[] = {
	offsetof(nt_send_wr, wr_id), offsetof(nt_send_wr, remote_addr), offsetof(nt_send_wr, opcode),
	offsetof(nt_send_wr, flags), offsetof(nt_send_wr, rkey), offsetof(nt_send_wr, inv_rkey),
	offsetof(nt_send_wr, num_sge), offsetof(nt_send_wr, sge),
	offsetof(nt_recv_wr, wr_id), offsetof(nt_recv_wr, num_sge), offsetof(nt_recv_wr, sge),
	offsetof(nt_wc, wr_id), offsetof(nt_wc, status), offsetof(nt_wc, opcode), offsetof(nt_wc, byte_len),
	offsetof(nt_wc, flags), offsetof(nt_wc, inv_rkey), offsetof(nt_wc, qp_num), offsetof(nt_wc, vendor_err),
	offsetof(nt_group, qp), offsetof(nt_group, send_off), offsetof(nt_group, nsend), offsetof(nt_group, recv_off),
	offsetof(nt_group, nrecv), offsetof(nt_group, send_rc), offsetof(nt_group, send_posted),
	offsetof(nt_group, recv_rc), offsetof(nt_group, recv_posted),
	offsetof(nt_srq_post, srq), offsetof(nt_srq_post, n), offsetof(nt_srq_post, rc), offsetof(nt_srq_post, posted),
};
const size_t *nt_field_offsets(int *n) { *n = sizeof(nt_offsets) / sizeof(nt_offsets[0]); return nt_offsets; }

int nt_poll(struct ibv_cq *cq, nt_wc *out, int n) {
	struct ibv_wc wc[NT_MAX_BATCH];
	if (n > NT_MAX_BATCH) n = NT_MAX_BATCH;
	int r = ibv_poll_cq(cq, n, wc);
	for (int i = 0; i < r; i++) {
		out[i].wr_id = wc[i].wr_id;
		out[i].status = wc[i].status;
		switch (wc[i].opcode) {
		case IBV_WC_SEND: out[i].opcode = 0; break;
		case IBV_WC_RDMA_WRITE: out[i].opcode = 1; break;
		case IBV_WC_RDMA_READ: out[i].opcode = 2; break;
		case IBV_WC_RECV: out[i].opcode = 3; break;
		default: out[i].opcode = 4;
		}
		// A flushed completion's opcode is undefined; only status and wr_id are valid.
		out[i].byte_len = wc[i].byte_len;
		out[i].flags = (wc[i].wc_flags & IBV_WC_WITH_INV) ? 1 : 0;
		out[i].inv_rkey = wc[i].invalidated_rkey;
		out[i].qp_num = wc[i].qp_num;
		out[i].vendor_err = wc[i].vendor_err;
	}
	return r;
}

int nt_bind(struct rdma_cm_id *id, int family, const void *addr, int port) {
	if (family == 4) {
		struct sockaddr_in sin; memset(&sin, 0, sizeof(sin));
		sin.sin_family = AF_INET; sin.sin_port = htons(port); memcpy(&sin.sin_addr, addr, 4);
		return rdma_bind_addr(id, (struct sockaddr *)&sin) ? -errno : 0;
	}
	struct sockaddr_in6 sin6; memset(&sin6, 0, sizeof(sin6));
	sin6.sin6_family = AF_INET6; sin6.sin6_port = htons(port); memcpy(&sin6.sin6_addr, addr, 16);
	return rdma_bind_addr(id, (struct sockaddr *)&sin6) ? -errno : 0;
}

void nt_fmt_addr(struct sockaddr *sa, char *buf, int len) {
	buf[0] = 0;
	if (!sa) return;
	char ip[INET6_ADDRSTRLEN] = "";
	if (sa->sa_family == AF_INET) {
		struct sockaddr_in *s = (struct sockaddr_in *)sa;
		inet_ntop(AF_INET, &s->sin_addr, ip, sizeof(ip));
		snprintf(buf, len, "%s:%d", ip, ntohs(s->sin_port));
	} else if (sa->sa_family == AF_INET6) {
		struct sockaddr_in6 *s = (struct sockaddr_in6 *)sa;
		inet_ntop(AF_INET6, &s->sin6_addr, ip, sizeof(ip));
		snprintf(buf, len, "[%s]:%d", ip, ntohs(s->sin6_port));
	}
}

// nt_sockaddr fills ss with an IPv4 (family 4) or IPv6 address and port.
static struct sockaddr *nt_sockaddr(struct sockaddr_storage *ss, int family, const void *addr, int port) {
	memset(ss, 0, sizeof(*ss));
	if (family == 4) {
		struct sockaddr_in *sin = (struct sockaddr_in *)ss;
		sin->sin_family = AF_INET; sin->sin_port = htons(port); memcpy(&sin->sin_addr, addr, 4);
	} else {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;
		sin6->sin6_family = AF_INET6; sin6->sin6_port = htons(port); memcpy(&sin6->sin6_addr, addr, 16);
	}
	return (struct sockaddr *)ss;
}

int nt_resolve_addr(struct rdma_cm_id *id, int family, const void *addr, int port, int ms) {
	struct sockaddr_storage ss;
	return rdma_resolve_addr(id, NULL, nt_sockaddr(&ss, family, addr, port), ms) ? -errno : 0;
}

int nt_connect(struct rdma_cm_id *id, const void *pd, int pdlen, int rr, int id_depth, int rnr) {
	struct rdma_conn_param p; memset(&p, 0, sizeof(p));
	p.private_data = pd; p.private_data_len = pdlen;
	p.responder_resources = rr; p.initiator_depth = id_depth;
	p.retry_count = 7; p.rnr_retry_count = rnr;
	return rdma_connect(id, &p) ? -errno : 0;
}

int nt_get_event(struct rdma_event_channel *ch, struct rdma_cm_event **ev) {
	return rdma_get_cm_event(ch, ev) ? -errno : 0;
}

int nt_accept(struct rdma_cm_id *id, const void *pd, int pdlen, int rr, int id_depth, int rnr) {
	struct rdma_conn_param p; memset(&p, 0, sizeof(p));
	p.private_data = pd; p.private_data_len = pdlen;
	p.responder_resources = rr; p.initiator_depth = id_depth; p.rnr_retry_count = rnr;
	return rdma_accept(id, &p) ? -errno : 0;
}

// nt_create_qp creates the ID's RC QP; with srq its receives come from that
// shared receive queue, and rwr and rsge are not used (ibv_create_qp(3)).
int nt_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd, struct ibv_cq *scq, struct ibv_cq *rcq,
		struct ibv_srq *srq, int swr, int rwr, int ssge, int rsge, int inl) {
	struct ibv_qp_init_attr a; memset(&a, 0, sizeof(a));
	a.send_cq = scq; a.recv_cq = rcq; a.srq = srq; a.qp_type = IBV_QPT_RC; a.sq_sig_all = 0;
	a.cap.max_send_wr = swr; a.cap.max_inline_data = inl; a.cap.max_send_sge = ssge;
	if (!srq) { a.cap.max_recv_wr = rwr; a.cap.max_recv_sge = rsge; }
	return rdma_create_qp(id, pd, &a) ? -errno : 0;
}

// nt_qp_min_rnr_timer sets the RNR NAK timer of a QP in RTS (an RTS to RTS
// transition, where it is an optional attribute).
int nt_qp_min_rnr_timer(struct ibv_qp *qp, int timer) {
	struct ibv_qp_attr a; memset(&a, 0, sizeof(a));
	a.min_rnr_timer = timer;
	int rc = ibv_modify_qp(qp, &a, IBV_QP_MIN_RNR_TIMER);
	return rc > 0 ? -rc : rc;
}

// nt_create_srq creates a shared receive queue of at least max_wr receives;
// *got_wr is what the device gave (ibv_create_srq(3) may round up).
struct ibv_srq *nt_create_srq(struct ibv_pd *pd, int max_wr, int max_sge, int *got_wr) {
	struct ibv_srq_init_attr a; memset(&a, 0, sizeof(a));
	a.attr.max_wr = max_wr; a.attr.max_sge = max_sge;
	struct ibv_srq *srq = ibv_create_srq(pd, &a);
	if (srq) *got_wr = a.attr.max_wr;
	return srq;
}

// nt_arm_srq arms the SRQ limit: IBV_EVENT_SRQ_LIMIT_REACHED comes once
// fewer than limit receives are left in it (ibv_modify_srq(3)).
int nt_arm_srq(struct ibv_srq *srq, int limit) {
	struct ibv_srq_attr a; memset(&a, 0, sizeof(a));
	a.srq_limit = limit;
	int rc = ibv_modify_srq(srq, &a, IBV_SRQ_LIMIT);
	return rc > 0 ? -rc : rc;
}

int nt_qp_error(struct ibv_qp *qp) {
	struct ibv_qp_attr a; memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_ERR;
	int rc = ibv_modify_qp(qp, &a, IBV_QP_STATE);
	return rc > 0 ? -rc : rc;
}

// nt_qp_in_error is 1 if the QP is in the error state, 0 if not, and a
// negative errno if it cannot be queried.
int nt_qp_in_error(struct ibv_qp *qp) {
	struct ibv_qp_attr a; struct ibv_qp_init_attr ia;
	memset(&a, 0, sizeof(a)); memset(&ia, 0, sizeof(ia));
	int rc = ibv_query_qp(qp, &a, IBV_QP_STATE, &ia);
	if (rc) return rc > 0 ? -rc : rc;
	return a.qp_state == IBV_QPS_ERR;
}

// nt_get_async_event reads one asynchronous event, copies out its type and,
// for a QP's event, the QP number (for an SRQ's, the SRQ), and acknowledges
// it at once: a QP or CQ
// cannot be destroyed while an event reported for it is unacknowledged.
int nt_get_async_event(struct ibv_context *c, int *type, uint32_t *qpn, int *has_qp, uintptr_t *srq, int *has_srq) {
	struct ibv_async_event ev;
	if (ibv_get_async_event(c, &ev)) return -errno;
	*type = ev.event_type;
	*has_qp = 0;
	*has_srq = 0;
	switch (ev.event_type) {
	case IBV_EVENT_SRQ_ERR: case IBV_EVENT_SRQ_LIMIT_REACHED:
		*srq = (uintptr_t)ev.element.srq;
		*has_srq = 1;
		break;
	case IBV_EVENT_QP_FATAL: case IBV_EVENT_QP_REQ_ERR: case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_COMM_EST: case IBV_EVENT_SQ_DRAINED: case IBV_EVENT_PATH_MIG:
	case IBV_EVENT_PATH_MIG_ERR: case IBV_EVENT_QP_LAST_WQE_REACHED:
		*qpn = ev.element.qp->qp_num;
		*has_qp = 1;
		break;
	default:
		break;
	}
	ibv_ack_async_event(&ev);
	return 0;
}

static int nt_get_cq_event(struct ibv_comp_channel *ch) {
	struct ibv_cq *cq; void *ctx;
	if (ibv_get_cq_event(ch, &cq, &ctx)) return -errno;
	ibv_ack_cq_events(cq, 1);
	return 1;
}

// nt_wait blocks until the completion channel or the eventfd is readable, then consumes and
// acknowledges a pending CQ event and drains the eventfd. Returns 0 or -errno.
int nt_wait(struct ibv_comp_channel *ch, int evfd) {
	struct pollfd fds[2] = {{.fd = ch->fd, .events = POLLIN}, {.fd = evfd, .events = POLLIN}};
	if (poll(fds, 2, -1) < 0) return errno == EINTR ? 0 : -errno;
	if (fds[0].revents & (POLLIN | POLLERR | POLLHUP)) {
		int rc = nt_get_cq_event(ch);
		if (rc < 0 && rc != -EAGAIN) return rc;
	}
	if (fds[1].revents & POLLIN) {
		uint64_t v;
		if (read(evfd, &v, sizeof(v)) < 0 && errno != EAGAIN) return -errno;
	}
	return 0;
}

int nt_device_count(void) {
	int n = 0;
	struct ibv_device **l = ibv_get_device_list(&n);
	if (!l) return -errno;
	ibv_free_device_list(l);
	return n;
}

/* librdmacm keeps an ibv_context open for each device it has used, and
 * closes it only once the device has left ibv_get_device_list and its last
 * rdma_cm ID is destroyed. It compares the two lists in rdma_get_devices
 * (and when an ID meets a device it does not know): a device removed after
 * that stays open, and the kernel's unregistration of a device without
 * disassociate_ucontext (rxe, siw) waits for it for ever. */
int nt_sync_devices(void) {
	int n = 0;
	struct ibv_context **l = rdma_get_devices(&n);
	if (!l) return errno ? -errno : -ENODEV;
	rdma_free_devices(l);
	return n;
}
