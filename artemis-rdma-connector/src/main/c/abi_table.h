/*
 * The struct layout facts the Java binding relies on, as an X-macro table: ABI(name, value).
 * Compiled into the shim (so the running library can be checked against the Java constants at start-up)
 * and into the gcc probe of the offsets test (so the Java constants are checked against the installed headers).
 * Names match the constants in dev.artemisrdma.verbs.Abi.
 */
#include <stddef.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <netinet/in.h>

#define ABI_TABLE(ABI) \
  ABI(SGE_SIZE, sizeof(struct ibv_sge)) \
  ABI(SGE_ADDR, offsetof(struct ibv_sge, addr)) \
  ABI(SGE_LENGTH, offsetof(struct ibv_sge, length)) \
  ABI(SGE_LKEY, offsetof(struct ibv_sge, lkey)) \
  ABI(SEND_WR_SIZE, sizeof(struct ibv_send_wr)) \
  ABI(SEND_WR_WR_ID, offsetof(struct ibv_send_wr, wr_id)) \
  ABI(SEND_WR_NEXT, offsetof(struct ibv_send_wr, next)) \
  ABI(SEND_WR_SG_LIST, offsetof(struct ibv_send_wr, sg_list)) \
  ABI(SEND_WR_NUM_SGE, offsetof(struct ibv_send_wr, num_sge)) \
  ABI(SEND_WR_OPCODE, offsetof(struct ibv_send_wr, opcode)) \
  ABI(SEND_WR_SEND_FLAGS, offsetof(struct ibv_send_wr, send_flags)) \
  ABI(SEND_WR_IMM_DATA, offsetof(struct ibv_send_wr, imm_data)) \
  ABI(RECV_WR_SIZE, sizeof(struct ibv_recv_wr)) \
  ABI(RECV_WR_WR_ID, offsetof(struct ibv_recv_wr, wr_id)) \
  ABI(RECV_WR_NEXT, offsetof(struct ibv_recv_wr, next)) \
  ABI(RECV_WR_SG_LIST, offsetof(struct ibv_recv_wr, sg_list)) \
  ABI(RECV_WR_NUM_SGE, offsetof(struct ibv_recv_wr, num_sge)) \
  ABI(WC_SIZE, sizeof(struct ibv_wc)) \
  ABI(WC_WR_ID, offsetof(struct ibv_wc, wr_id)) \
  ABI(WC_STATUS, offsetof(struct ibv_wc, status)) \
  ABI(WC_OPCODE, offsetof(struct ibv_wc, opcode)) \
  ABI(WC_VENDOR_ERR, offsetof(struct ibv_wc, vendor_err)) \
  ABI(WC_BYTE_LEN, offsetof(struct ibv_wc, byte_len)) \
  ABI(WC_IMM_DATA, offsetof(struct ibv_wc, imm_data)) \
  ABI(WC_QP_NUM, offsetof(struct ibv_wc, qp_num)) \
  ABI(WC_WC_FLAGS, offsetof(struct ibv_wc, wc_flags)) \
  ABI(QP_INIT_ATTR_SIZE, sizeof(struct ibv_qp_init_attr)) \
  ABI(QP_INIT_ATTR_QP_CONTEXT, offsetof(struct ibv_qp_init_attr, qp_context)) \
  ABI(QP_INIT_ATTR_SEND_CQ, offsetof(struct ibv_qp_init_attr, send_cq)) \
  ABI(QP_INIT_ATTR_RECV_CQ, offsetof(struct ibv_qp_init_attr, recv_cq)) \
  ABI(QP_INIT_ATTR_SRQ, offsetof(struct ibv_qp_init_attr, srq)) \
  ABI(QP_INIT_ATTR_CAP, offsetof(struct ibv_qp_init_attr, cap)) \
  ABI(QP_INIT_ATTR_QP_TYPE, offsetof(struct ibv_qp_init_attr, qp_type)) \
  ABI(QP_INIT_ATTR_SQ_SIG_ALL, offsetof(struct ibv_qp_init_attr, sq_sig_all)) \
  ABI(QP_CAP_MAX_SEND_WR, offsetof(struct ibv_qp_cap, max_send_wr)) \
  ABI(QP_CAP_MAX_RECV_WR, offsetof(struct ibv_qp_cap, max_recv_wr)) \
  ABI(QP_CAP_MAX_SEND_SGE, offsetof(struct ibv_qp_cap, max_send_sge)) \
  ABI(QP_CAP_MAX_RECV_SGE, offsetof(struct ibv_qp_cap, max_recv_sge)) \
  ABI(QP_CAP_MAX_INLINE_DATA, offsetof(struct ibv_qp_cap, max_inline_data)) \
  ABI(QP_ATTR_SIZE, sizeof(struct ibv_qp_attr)) \
  ABI(QP_ATTR_QP_STATE, offsetof(struct ibv_qp_attr, qp_state)) \
  ABI(QP_ATTR_AH_ATTR, offsetof(struct ibv_qp_attr, ah_attr)) \
  ABI(QP_ATTR_TIMEOUT, offsetof(struct ibv_qp_attr, timeout)) \
  ABI(QP_ATTR_RETRY_CNT, offsetof(struct ibv_qp_attr, retry_cnt)) \
  ABI(AH_ATTR_TRAFFIC_CLASS, offsetof(struct ibv_ah_attr, grh.traffic_class)) \
  ABI(CM_ID_VERBS, offsetof(struct rdma_cm_id, verbs)) \
  ABI(CM_ID_CHANNEL, offsetof(struct rdma_cm_id, channel)) \
  ABI(CM_ID_CONTEXT, offsetof(struct rdma_cm_id, context)) \
  ABI(CM_ID_QP, offsetof(struct rdma_cm_id, qp)) \
  ABI(CM_ID_SRC_ADDR, offsetof(struct rdma_cm_id, route.addr.src_addr)) \
  ABI(CM_ID_DST_ADDR, offsetof(struct rdma_cm_id, route.addr.dst_addr)) \
  ABI(CM_ID_PORT_NUM, offsetof(struct rdma_cm_id, port_num)) \
  ABI(CM_ID_PD, offsetof(struct rdma_cm_id, pd)) \
  ABI(CONN_PARAM_SIZE, sizeof(struct rdma_conn_param)) \
  ABI(CONN_PARAM_PRIVATE_DATA, offsetof(struct rdma_conn_param, private_data)) \
  ABI(CONN_PARAM_PRIVATE_DATA_LEN, offsetof(struct rdma_conn_param, private_data_len)) \
  ABI(CONN_PARAM_RESPONDER_RESOURCES, offsetof(struct rdma_conn_param, responder_resources)) \
  ABI(CONN_PARAM_INITIATOR_DEPTH, offsetof(struct rdma_conn_param, initiator_depth)) \
  ABI(CONN_PARAM_FLOW_CONTROL, offsetof(struct rdma_conn_param, flow_control)) \
  ABI(CONN_PARAM_RETRY_COUNT, offsetof(struct rdma_conn_param, retry_count)) \
  ABI(CONN_PARAM_RNR_RETRY_COUNT, offsetof(struct rdma_conn_param, rnr_retry_count)) \
  ABI(CONN_PARAM_SRQ, offsetof(struct rdma_conn_param, srq)) \
  ABI(CONN_PARAM_QP_NUM, offsetof(struct rdma_conn_param, qp_num)) \
  ABI(CM_EVENT_SIZE, sizeof(struct rdma_cm_event)) \
  ABI(CM_EVENT_ID, offsetof(struct rdma_cm_event, id)) \
  ABI(CM_EVENT_LISTEN_ID, offsetof(struct rdma_cm_event, listen_id)) \
  ABI(CM_EVENT_EVENT, offsetof(struct rdma_cm_event, event)) \
  ABI(CM_EVENT_STATUS, offsetof(struct rdma_cm_event, status)) \
  ABI(CM_EVENT_PARAM_CONN, offsetof(struct rdma_cm_event, param.conn)) \
  ABI(ADDRINFO_SIZE, sizeof(struct rdma_addrinfo)) \
  ABI(ADDRINFO_FLAGS, offsetof(struct rdma_addrinfo, ai_flags)) \
  ABI(ADDRINFO_FAMILY, offsetof(struct rdma_addrinfo, ai_family)) \
  ABI(ADDRINFO_QP_TYPE, offsetof(struct rdma_addrinfo, ai_qp_type)) \
  ABI(ADDRINFO_PORT_SPACE, offsetof(struct rdma_addrinfo, ai_port_space)) \
  ABI(ADDRINFO_SRC_LEN, offsetof(struct rdma_addrinfo, ai_src_len)) \
  ABI(ADDRINFO_DST_LEN, offsetof(struct rdma_addrinfo, ai_dst_len)) \
  ABI(ADDRINFO_SRC_ADDR, offsetof(struct rdma_addrinfo, ai_src_addr)) \
  ABI(ADDRINFO_DST_ADDR, offsetof(struct rdma_addrinfo, ai_dst_addr)) \
  ABI(ADDRINFO_NEXT, offsetof(struct rdma_addrinfo, ai_next)) \
  ABI(EVENT_CHANNEL_FD, offsetof(struct rdma_event_channel, fd)) \
  ABI(COMP_CHANNEL_FD, offsetof(struct ibv_comp_channel, fd)) \
  ABI(MR_ADDR, offsetof(struct ibv_mr, addr)) \
  ABI(MR_LENGTH, offsetof(struct ibv_mr, length)) \
  ABI(MR_LKEY, offsetof(struct ibv_mr, lkey)) \
  ABI(MR_RKEY, offsetof(struct ibv_mr, rkey)) \
  ABI(QP_CONTEXT, offsetof(struct ibv_qp, context)) \
  ABI(QP_QP_NUM, offsetof(struct ibv_qp, qp_num)) \
  ABI(QP_STATE, offsetof(struct ibv_qp, state)) \
  ABI(CQ_CONTEXT, offsetof(struct ibv_cq, context)) \
  ABI(CQ_CQE, offsetof(struct ibv_cq, cqe)) \
  ABI(CONTEXT_DEVICE, offsetof(struct ibv_context, device)) \
  ABI(DEVICE_TRANSPORT_TYPE, offsetof(struct ibv_device, transport_type)) \
  ABI(CONTEXT_OPS, offsetof(struct ibv_context, ops)) \
  ABI(OPS_POLL_CQ, offsetof(struct ibv_context_ops, poll_cq)) \
  ABI(OPS_REQ_NOTIFY_CQ, offsetof(struct ibv_context_ops, req_notify_cq)) \
  ABI(OPS_POST_SEND, offsetof(struct ibv_context_ops, post_send)) \
  ABI(OPS_POST_RECV, offsetof(struct ibv_context_ops, post_recv)) \
  ABI(DEVICE_ATTR_SIZE, sizeof(struct ibv_device_attr)) \
  ABI(DEVICE_ATTR_MAX_MR_SIZE, offsetof(struct ibv_device_attr, max_mr_size)) \
  ABI(DEVICE_ATTR_MAX_QP, offsetof(struct ibv_device_attr, max_qp)) \
  ABI(DEVICE_ATTR_MAX_QP_WR, offsetof(struct ibv_device_attr, max_qp_wr)) \
  ABI(DEVICE_ATTR_MAX_SGE, offsetof(struct ibv_device_attr, max_sge)) \
  ABI(DEVICE_ATTR_MAX_CQ, offsetof(struct ibv_device_attr, max_cq)) \
  ABI(DEVICE_ATTR_MAX_CQE, offsetof(struct ibv_device_attr, max_cqe)) \
  ABI(DEVICE_ATTR_MAX_MR, offsetof(struct ibv_device_attr, max_mr)) \
  ABI(DEVICE_ATTR_PHYS_PORT_CNT, offsetof(struct ibv_device_attr, phys_port_cnt)) \
  ABI(PORT_ATTR_STATE, offsetof(struct ibv_port_attr, state)) \
  ABI(PORT_ATTR_ACTIVE_MTU, offsetof(struct ibv_port_attr, active_mtu)) \
  ABI(PORT_ATTR_MAX_MSG_SZ, offsetof(struct ibv_port_attr, max_msg_sz)) \
  ABI(PORT_ATTR_LINK_LAYER, offsetof(struct ibv_port_attr, link_layer)) \
  ABI(SOCKADDR_IN_SIZE, sizeof(struct sockaddr_in)) \
  ABI(SOCKADDR_IN6_SIZE, sizeof(struct sockaddr_in6)) \
  ABI(SOCKADDR_STORAGE_SIZE, sizeof(struct sockaddr_storage)) \
  ABI(SRQ_INIT_ATTR_SIZE, sizeof(struct ibv_srq_init_attr)) \
  ABI(SRQ_INIT_ATTR_MAX_WR, offsetof(struct ibv_srq_init_attr, attr.max_wr)) \
  ABI(SRQ_INIT_ATTR_MAX_SGE, offsetof(struct ibv_srq_init_attr, attr.max_sge)) \
  ABI(SRQ_INIT_ATTR_SRQ_LIMIT, offsetof(struct ibv_srq_init_attr, attr.srq_limit)) \
  ABI(SRQ_ATTR_SIZE, sizeof(struct ibv_srq_attr)) \
  ABI(SRQ_ATTR_MAX_WR, offsetof(struct ibv_srq_attr, max_wr)) \
  ABI(SRQ_ATTR_SRQ_LIMIT, offsetof(struct ibv_srq_attr, srq_limit)) \
  ABI(SRQ_CONTEXT, offsetof(struct ibv_srq, context)) \
  ABI(DEVICE_ATTR_MAX_SRQ, offsetof(struct ibv_device_attr, max_srq)) \
  ABI(DEVICE_ATTR_MAX_SRQ_WR, offsetof(struct ibv_device_attr, max_srq_wr)) \
  ABI(CONTEXT_ASYNC_FD, offsetof(struct ibv_context, async_fd)) \
  ABI(ASYNC_EVENT_SIZE, sizeof(struct ibv_async_event)) \
  ABI(ASYNC_EVENT_ELEMENT, offsetof(struct ibv_async_event, element)) \
  ABI(ASYNC_EVENT_EVENT_TYPE, offsetof(struct ibv_async_event, event_type)) \
  ABI(EVENT_QP_FATAL, IBV_EVENT_QP_FATAL) \
  ABI(EVENT_QP_REQ_ERR, IBV_EVENT_QP_REQ_ERR) \
  ABI(EVENT_QP_ACCESS_ERR, IBV_EVENT_QP_ACCESS_ERR) \
  ABI(EVENT_DEVICE_FATAL, IBV_EVENT_DEVICE_FATAL) \
  ABI(EVENT_PORT_ACTIVE, IBV_EVENT_PORT_ACTIVE) \
  ABI(EVENT_PORT_ERR, IBV_EVENT_PORT_ERR) \
  ABI(EVENT_SRQ_LIMIT_REACHED, IBV_EVENT_SRQ_LIMIT_REACHED) \
  ABI(EVENT_WQ_FATAL, IBV_EVENT_WQ_FATAL) \
  ABI(QPS_ERR, IBV_QPS_ERR) \
  ABI(PORT_ACTIVE_STATE, IBV_PORT_ACTIVE)
