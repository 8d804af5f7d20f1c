// The C half of package verbs: the structures the Go side mirrors and the
// helpers it calls, defined in verbs_shim.c. Only verbs_linux.go includes it.

#ifndef NT_VERBS_SHIM_H
#define NT_VERBS_SHIM_H

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define NT_MAX_SEND_SGE 8
#define NT_MAX_RECV_SGE 2
#define NT_MAX_BATCH 64

typedef struct { uint64_t addr; uint32_t length; uint32_t lkey; } nt_sge;
typedef struct {
	uint64_t wr_id; uint64_t remote_addr;
	uint32_t opcode; uint32_t flags; uint32_t rkey; uint32_t inv_rkey;
	uint32_t num_sge; uint32_t pad;
	nt_sge sge[NT_MAX_SEND_SGE];
} nt_send_wr;
typedef struct { uint64_t wr_id; uint32_t num_sge; uint32_t pad; nt_sge sge[NT_MAX_RECV_SGE]; } nt_recv_wr;
typedef struct {
	uint64_t wr_id; uint32_t status; uint32_t opcode; uint32_t byte_len; uint32_t flags;
	uint32_t inv_rkey; uint32_t qp_num; uint32_t vendor_err; uint32_t pad;
} nt_wc;

typedef struct {
	struct ibv_qp *qp;
	uint32_t send_off, nsend, recv_off, nrecv;
	int32_t send_rc, send_posted, recv_rc, recv_posted;
} nt_group;

// nt_srq_post is a batch's receives for a shared receive queue: the C side
// reads srq and n and writes rc and posted.
typedef struct {
	struct ibv_srq *srq;
	uint32_t n;
	int32_t rc, posted;
} nt_srq_post;

int nt_set_nonblock(int fd);
void nt_post_batch(nt_group *g, int ng, nt_send_wr *s, nt_recv_wr *r, nt_srq_post *sp, nt_recv_wr *sr);
const size_t *nt_field_offsets(int *n);
int nt_poll(struct ibv_cq *cq, nt_wc *out, int n);
int nt_bind(struct rdma_cm_id *id, int family, const void *addr, int port);
void nt_fmt_addr(struct sockaddr *sa, char *buf, int len);
int nt_resolve_addr(struct rdma_cm_id *id, int family, const void *addr, int port, int ms);
int nt_connect(struct rdma_cm_id *id, const void *pd, int pdlen, int rr, int id_depth, int rnr);
int nt_get_event(struct rdma_event_channel *ch, struct rdma_cm_event **ev);
int nt_accept(struct rdma_cm_id *id, const void *pd, int pdlen, int rr, int id_depth, int rnr);
int nt_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd, struct ibv_cq *scq, struct ibv_cq *rcq,
		struct ibv_srq *srq, int swr, int rwr, int ssge, int rsge, int inl);
int nt_qp_error(struct ibv_qp *qp);
int nt_qp_in_error(struct ibv_qp *qp);
int nt_qp_min_rnr_timer(struct ibv_qp *qp, int timer);
struct ibv_srq *nt_create_srq(struct ibv_pd *pd, int max_wr, int max_sge, int *got_wr);
int nt_arm_srq(struct ibv_srq *srq, int limit);
int nt_get_async_event(struct ibv_context *c, int *type, uint32_t *qpn, int *has_qp, uintptr_t *srq, int *has_srq);
int nt_wait(struct ibv_comp_channel *ch, int evfd);
int nt_device_count(void);
int nt_sync_devices(void);

#endif
