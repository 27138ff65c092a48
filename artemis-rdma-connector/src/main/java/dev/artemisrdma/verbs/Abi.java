package dev.artemisrdma.verbs;

/**
 * The struct layouts (x86_64, rdma-core v44 to v65) the binding reads and writes, as byte offsets and sizes.
 *
 * <p>These are not guessed: the offsets test compiles a gcc probe against the installed headers and compares every
 * value here with {@code offsetof}/{@code sizeof}; at start-up {@link AbiCheck} compares them with the table the
 * native shim was compiled with. Names match {@code src/main/c/abi_table.h}.
 *
 * <p>Its one job is this table. Threads: compile-time constants only, immutable, so any thread.
 */
public final class Abi {

    private Abi() {
    }

    public static final int SGE_SIZE = 16;
    public static final int SGE_ADDR = 0;
    public static final int SGE_LENGTH = 8;
    public static final int SGE_LKEY = 12;
    public static final int SEND_WR_SIZE = 128;
    public static final int SEND_WR_WR_ID = 0;
    public static final int SEND_WR_NEXT = 8;
    public static final int SEND_WR_SG_LIST = 16;
    public static final int SEND_WR_NUM_SGE = 24;
    public static final int SEND_WR_OPCODE = 28;
    public static final int SEND_WR_SEND_FLAGS = 32;
    /** __be32 imm_data (a union with invalidate_rkey): read by the provider for the *_WITH_IMM opcodes only. */
    public static final int SEND_WR_IMM_DATA = 36;
    public static final int RECV_WR_SIZE = 32;
    public static final int RECV_WR_WR_ID = 0;
    public static final int RECV_WR_NEXT = 8;
    public static final int RECV_WR_SG_LIST = 16;
    public static final int RECV_WR_NUM_SGE = 24;
    public static final int WC_SIZE = 48;
    public static final int WC_WR_ID = 0;
    public static final int WC_STATUS = 8;
    public static final int WC_OPCODE = 12;
    public static final int WC_VENDOR_ERR = 16;
    public static final int WC_BYTE_LEN = 20;
    /** __be32 imm_data: valid when wc_flags has IBV_WC_WITH_IMM. */
    public static final int WC_IMM_DATA = 24;
    public static final int WC_QP_NUM = 28;
    public static final int WC_WC_FLAGS = 36;
    public static final int QP_INIT_ATTR_SIZE = 64;
    public static final int QP_INIT_ATTR_QP_CONTEXT = 0;
    public static final int QP_INIT_ATTR_SEND_CQ = 8;
    public static final int QP_INIT_ATTR_RECV_CQ = 16;
    public static final int QP_INIT_ATTR_SRQ = 24;
    public static final int QP_INIT_ATTR_CAP = 32;
    public static final int QP_INIT_ATTR_QP_TYPE = 52;
    public static final int QP_INIT_ATTR_SQ_SIG_ALL = 56;
    public static final int QP_CAP_MAX_SEND_WR = 0;
    public static final int QP_CAP_MAX_RECV_WR = 4;
    public static final int QP_CAP_MAX_SEND_SGE = 8;
    public static final int QP_CAP_MAX_RECV_SGE = 12;
    public static final int QP_CAP_MAX_INLINE_DATA = 16;
    public static final int QP_ATTR_SIZE = 144;
    public static final int QP_ATTR_QP_STATE = 0;
    public static final int QP_ATTR_AH_ATTR = 56;
    public static final int AH_ATTR_TRAFFIC_CLASS = 22;
    /** struct ibv_qp_attr: uint8_t timeout (the local ACK timeout exponent) and retry_cnt, after port_num. */
    public static final int QP_ATTR_TIMEOUT = 130;
    public static final int QP_ATTR_RETRY_CNT = 131;
    public static final int CM_ID_VERBS = 0;
    public static final int CM_ID_CHANNEL = 8;
    public static final int CM_ID_CONTEXT = 16;
    public static final int CM_ID_QP = 24;
    public static final int CM_ID_SRC_ADDR = 32;
    public static final int CM_ID_DST_ADDR = 160;
    public static final int CM_ID_PORT_NUM = 348;
    public static final int CM_ID_PD = 400;
    public static final int CONN_PARAM_SIZE = 24;
    public static final int CONN_PARAM_PRIVATE_DATA = 0;
    public static final int CONN_PARAM_PRIVATE_DATA_LEN = 8;
    public static final int CONN_PARAM_RESPONDER_RESOURCES = 9;
    public static final int CONN_PARAM_INITIATOR_DEPTH = 10;
    public static final int CONN_PARAM_FLOW_CONTROL = 11;
    public static final int CONN_PARAM_RETRY_COUNT = 12;
    public static final int CONN_PARAM_RNR_RETRY_COUNT = 13;
    public static final int CONN_PARAM_SRQ = 14;
    public static final int CONN_PARAM_QP_NUM = 16;
    public static final int CM_EVENT_SIZE = 80;
    public static final int CM_EVENT_ID = 0;
    public static final int CM_EVENT_LISTEN_ID = 8;
    public static final int CM_EVENT_EVENT = 16;
    public static final int CM_EVENT_STATUS = 20;
    public static final int CM_EVENT_PARAM_CONN = 24;
    public static final int ADDRINFO_SIZE = 96;
    public static final int ADDRINFO_FLAGS = 0;
    public static final int ADDRINFO_FAMILY = 4;
    public static final int ADDRINFO_QP_TYPE = 8;
    public static final int ADDRINFO_PORT_SPACE = 12;
    public static final int ADDRINFO_SRC_LEN = 16;
    public static final int ADDRINFO_DST_LEN = 20;
    public static final int ADDRINFO_SRC_ADDR = 24;
    public static final int ADDRINFO_DST_ADDR = 32;
    public static final int ADDRINFO_NEXT = 88;
    public static final int EVENT_CHANNEL_FD = 0;
    public static final int COMP_CHANNEL_FD = 8;
    public static final int MR_ADDR = 16;
    public static final int MR_LENGTH = 24;
    public static final int MR_LKEY = 36;
    public static final int MR_RKEY = 40;
    public static final int QP_CONTEXT = 0;
    public static final int QP_QP_NUM = 52;
    public static final int QP_STATE = 56;
    public static final int CQ_CONTEXT = 0;
    public static final int CQ_CQE = 28;
    public static final int CONTEXT_DEVICE = 0;
    /** enum ibv_transport_type of struct ibv_device: IBV_TRANSPORT_IB (0) for InfiniBand and RoCE, 1 for iWARP. */
    public static final int DEVICE_TRANSPORT_TYPE = 20;
    public static final int CONTEXT_OPS = 8;
    public static final int OPS_POLL_CQ = 88;
    public static final int OPS_REQ_NOTIFY_CQ = 96;
    public static final int OPS_POST_SEND = 200;
    public static final int OPS_POST_RECV = 208;
    public static final int DEVICE_ATTR_SIZE = 232;
    public static final int DEVICE_ATTR_MAX_MR_SIZE = 80;
    public static final int DEVICE_ATTR_MAX_QP = 108;
    public static final int DEVICE_ATTR_MAX_QP_WR = 112;
    public static final int DEVICE_ATTR_MAX_SGE = 120;
    public static final int DEVICE_ATTR_MAX_CQ = 128;
    public static final int DEVICE_ATTR_MAX_CQE = 132;
    public static final int DEVICE_ATTR_MAX_MR = 136;
    public static final int DEVICE_ATTR_PHYS_PORT_CNT = 227;
    public static final int PORT_ATTR_STATE = 0;
    public static final int PORT_ATTR_ACTIVE_MTU = 8;
    public static final int PORT_ATTR_MAX_MSG_SZ = 20;
    public static final int PORT_ATTR_LINK_LAYER = 46;
    public static final int SOCKADDR_IN_SIZE = 16;
    public static final int SOCKADDR_IN6_SIZE = 28;
    public static final int SOCKADDR_STORAGE_SIZE = 128;
    public static final int SRQ_INIT_ATTR_SIZE = 24;
    public static final int SRQ_INIT_ATTR_MAX_WR = 8;
    public static final int SRQ_INIT_ATTR_MAX_SGE = 12;
    public static final int SRQ_INIT_ATTR_SRQ_LIMIT = 16;
    public static final int SRQ_ATTR_SIZE = 12;
    public static final int SRQ_ATTR_MAX_WR = 0;
    public static final int SRQ_ATTR_SRQ_LIMIT = 8;
    public static final int SRQ_CONTEXT = 0;
    public static final int DEVICE_ATTR_MAX_SRQ = 212;
    public static final int DEVICE_ATTR_MAX_SRQ_WR = 216;
    public static final int CONTEXT_ASYNC_FD = 268;
    public static final int ASYNC_EVENT_SIZE = 16;
    public static final int ASYNC_EVENT_ELEMENT = 0;
    public static final int ASYNC_EVENT_EVENT_TYPE = 8;
    /** enum values the binding relies on (ibv_event_type, ibv_qp_state, ibv_port_state), checked like the layouts */
    public static final int EVENT_QP_FATAL = 1;
    public static final int EVENT_QP_REQ_ERR = 2;
    public static final int EVENT_QP_ACCESS_ERR = 3;
    public static final int EVENT_DEVICE_FATAL = 8;
    public static final int EVENT_PORT_ACTIVE = 9;
    public static final int EVENT_PORT_ERR = 10;
    public static final int EVENT_SRQ_LIMIT_REACHED = 15;
    public static final int EVENT_WQ_FATAL = 19;
    public static final int QPS_ERR = 6;
    public static final int PORT_ACTIVE_STATE = 4;

    /** sizeof(struct ibv_port_attr) grew from 52 to 56 in rdma-core v49; buffers for it are this large. */
    public static final int PORT_ATTR_BUFFER = 64;
}
