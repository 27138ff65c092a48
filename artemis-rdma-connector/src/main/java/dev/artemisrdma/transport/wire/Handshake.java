package dev.artemisrdma.transport.wire;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;

import dev.artemisrdma.transport.config.TransportConfig;

/**
 * The connection handshake, carried in rdma_cm private data (connect: at most 56 bytes, accept: at most 196,
 * reject: at most 148). Each side states what it offers the other: its receive slot size, the receives it has
 * posted (the peer's initial send credits) and the largest frame it accepts. Big-endian:
 *
 * <pre>
 *  offset size  connect / accept                    reject
 *   0     4     magic 0x41524D41 ("ARMA")            magic
 *   4     2     protocol version (1)                 protocol version
 *   6     2     kind: 1 connect, 2 accept            kind: 3 reject
 *   8     4     receive slot size (bytes)            reason length n
 *  12     4     initial credits (receives posted)    reason, n bytes of UTF-8 (n &lt;= 136)
 *  16     4     maximum frame size (bytes)
 *  20     4     features this side reads (bit 0: PACKED SENDs, bit 1: credit growth,
 *               bit 2: fragments with their header in immediate data, bit 3: credit recall,
 *               bit 4: whole frames with their header, credits included, in immediate data,
 *               bit 5: TLS in frames, which both sides must state or neither)
 *  24     4     most credits this side may grant (with bit 1; else the initial credits)
 * </pre>
 *
 * A newer peer must keep the magic and the version field where they are, so an old one can say why it refuses.
 *
 * <p>Features are negotiated, not versioned: offset 20 was "reserved, 0" before packing existed and rdma_cm pads
 * private data with zeros, so an older peer states no features, ignores ours, and both sides simply send it one
 * frame per SEND. Each side uses a feature only toward a peer that stated it reads it; bits we do not know are
 * ignored (a newer peer's features), so adding one never needs a version bump.
 *
 * <p>Credit growth (bit 1) tells the peer which credit scheme this side speaks. A side that states it accepts a
 * window that starts at its peer's initial credits and grows, by later grants, up to the peer's maximum (offset 24),
 * and it asks for more with {@link FrameHeader#HINT_CREDIT_WANTED}. A listener with a shared receive queue grants
 * from its pool only to peers that state it; an older peer (no bit) is served with per-connection queues, whose
 * window is fixed, so old and new sides still interoperate. A maximum below the initial credits, or above the
 * protocol's window, refuses the peer.
 *
 * <p>Immediate fragments (bit 2): this side reads a fragment whose header is the SEND's immediate data
 * ({@link ImmediateHeader}), a whole slot of payload; a peer without the bit gets in-band headers as before.
 *
 * <p>Whole immediate frames (bit 4): this side reads a frame of one SEND whose header, credits and hint included, is
 * the SEND's immediate data ({@link ImmediateHeader#whole}); a peer without the bit gets such a frame as an immediate
 * first fragment (which returns no credit) or with its header in band.
 *
 * <p>Credit recall (bit 3): this side answers a credit frame with {@link FrameHeader#RECALL} by giving back, in a credit
 * frame with {@link FrameHeader#RELEASE}, the credits it holds beyond what the recall lets it keep, when it has nothing
 * queued to send. A listener's shared pool recalls grown windows of idle connections only from peers that state it.
 *
 * <p>Its one job is this encoding. Threads: static methods without state and an immutable {@link Params}, so any
 * thread; the connecting thread encodes a connect and decodes the accept or reject, the listener's rdma_cm event
 * thread decodes a connect and encodes the answer.
 */
public final class Handshake {

    public static final int MAGIC = 0x41524D41;
    public static final short VERSION = 1;
    public static final int LENGTH = 24;
    /** The peer reads SENDs that carry several frames ({@link FrameHeader#PACKED}). */
    public static final int FEATURE_PACKED = 0x1;
    /** The peer accepts credit grants beyond its initial window, up to the maximum the granting side states. */
    public static final int FEATURE_CREDIT_GROWTH = 0x2;
    /** The peer reads fragments whose header is the SEND's immediate data ({@link ImmediateHeader}). */
    public static final int FEATURE_IMMEDIATE_FRAGMENTS = 0x4;
    /** The peer gives unused credits back when asked ({@link FrameHeader#RECALL}, {@link FrameHeader#RELEASE}). */
    public static final int FEATURE_CREDIT_RECALL = 0x8;
    /** The peer reads a frame of one SEND whose header, credits included, is the immediate data. */
    public static final int FEATURE_IMMEDIATE_WHOLE = 0x10;
    /**
     * The stating side speaks TLS in frames on this connection. Unlike the others it is not a choice each side makes
     * alone: a TLS listener refuses a peer that does not state it, and a TLS connector a listener that does not.
     */
    public static final int FEATURE_TLS = 0x20;
    /** Every feature this version knows, and states (see {@code QueuePairSetup#localParams}); others are ignored. */
    public static final int KNOWN_FEATURES = FEATURE_PACKED | FEATURE_CREDIT_GROWTH | FEATURE_IMMEDIATE_FRAGMENTS
            | FEATURE_CREDIT_RECALL | FEATURE_IMMEDIATE_WHOLE;
    /** Every bit this version reads in a peer's handshake: the features it always states, and TLS. */
    static final int READ_FEATURES = KNOWN_FEATURES | FEATURE_TLS;
    /** What this version writes: the fixed part plus the maximum credits. */
    static final int ENCODED_LENGTH = LENGTH + 4;
    static final short KIND_CONNECT = 1;
    static final short KIND_ACCEPT = 2;
    static final short KIND_REJECT = 3;
    /** Reject private data is limited to 148 bytes over RDMA_PS_TCP. */
    static final int MAX_REASON_BYTES = 148 - 12;

    /**
     * What one side offers: the peer sends into slots of {@code slotSize} with {@code initialCredits} credits;
     * {@code features} are the {@code FEATURE_*} bits this side reads.
     */
    public record Params(int slotSize, int initialCredits, int maxFrameSize, int features, int maxCredits) {

        /** Params stating no features: what a peer from before feature negotiation sends. */
        public Params(int slotSize, int initialCredits, int maxFrameSize) {
            this(slotSize, initialCredits, maxFrameSize, 0);
        }

        /** Params whose window never grows beyond the initial credits. */
        public Params(int slotSize, int initialCredits, int maxFrameSize, int features) {
            this(slotSize, initialCredits, maxFrameSize, features, initialCredits);
        }

        public boolean readsPacked() {
            return (features & FEATURE_PACKED) != 0;
        }

        /** This side reads fragments with their header in the SEND's immediate data. */
        public boolean readsImmediateFragments() {
            return (features & FEATURE_IMMEDIATE_FRAGMENTS) != 0;
        }

        /** This side reads whole frames whose header, credits included, is the immediate data. */
        public boolean readsImmediateWhole() {
            return (features & FEATURE_IMMEDIATE_WHOLE) != 0;
        }

        /** This side gives unused credits back when the granting side recalls them. */
        public boolean answersCreditRecall() {
            return (features & FEATURE_CREDIT_RECALL) != 0;
        }

        /** This side takes grants beyond its initial window (and may ask for them). */
        public boolean acceptsCreditGrowth() {
            return (features & FEATURE_CREDIT_GROWTH) != 0;
        }

        /** This side speaks TLS on this connection (feature bit 5). */
        public boolean speaksTls() {
            return (features & FEATURE_TLS) != 0;
        }

        /** This side states every feature this build knows: false for an older build (a newer one states more). */
        public boolean statesEveryKnownFeature() {
            return (features & KNOWN_FEATURES) == KNOWN_FEATURES;
        }
    }

    private Handshake() {
    }

    public static byte[] encodeConnect(Params p) {
        return encode(KIND_CONNECT, p);
    }

    public static byte[] encodeAccept(Params p) {
        return encode(KIND_ACCEPT, p);
    }

    /** The peer's connect request; the exception message is the reason to reject it with. */
    public static Params decodeConnect(byte[] data) throws HandshakeException {
        return decode(KIND_CONNECT, data);
    }

    public static Params decodeAccept(byte[] data) throws HandshakeException {
        return decode(KIND_ACCEPT, data);
    }

    public static byte[] encodeReject(String reason) {
        byte[] text = truncateUtf8(reason == null ? "" : reason, MAX_REASON_BYTES);
        ByteBuffer b = ByteBuffer.allocate(12 + text.length);
        b.putInt(MAGIC).putShort(VERSION).putShort(KIND_REJECT).putInt(text.length).put(text);
        return b.array();
    }

    /** Whether {@code data} is a reject of this protocol (with a reason of ours), not a fabric's own. */
    public static boolean isOurReject(byte[] data) {
        if (data == null || data.length < 12) {
            return false;
        }
        ByteBuffer b = ByteBuffer.wrap(data);
        return b.getInt(0) == MAGIC && b.getShort(6) == KIND_REJECT;
    }

    /** The reason in a reject's private data, or a description of what came when it is not ours. */
    public static String decodeReject(byte[] data) {
        if (data == null || data.length == 0) {
            return "no reason given";
        }
        if (!isOurReject(data)) {
            return "no reason given (" + data.length + " bytes of foreign reject data)";
        }
        int n = ByteBuffer.wrap(data).getInt(8);
        if (n < 0 || n > data.length - 12) {
            return "malformed reject reason";
        }
        return new String(data, 12, n, StandardCharsets.UTF_8);
    }

    private static byte[] encode(short kind, Params p) {
        ByteBuffer b = ByteBuffer.allocate(ENCODED_LENGTH);
        b.putInt(MAGIC).putShort(VERSION).putShort(kind)
                .putInt(p.slotSize()).putInt(p.initialCredits()).putInt(p.maxFrameSize()).putInt(p.features())
                .putInt(p.maxCredits());
        return b.array();
    }

    private static Params decode(short kind, byte[] data) throws HandshakeException {
        // rdma_cm pads private data with zeros up to the transport's size, so only a minimum length is checked
        if (data == null || data.length < 8) {
            throw new HandshakeException("not an artemis-rdma peer (handshake of " + (data == null ? 0 : data.length)
                    + " bytes)");
        }
        ByteBuffer b = ByteBuffer.wrap(data);
        int magic = b.getInt(0);
        if (magic != MAGIC) {
            throw new HandshakeException(String.format("not an artemis-rdma peer (magic 0x%08x)", magic));
        }
        short version = b.getShort(4);
        if (version != VERSION) {
            throw new HandshakeException("unsupported protocol version " + version + " (this side speaks "
                    + VERSION + ")");
        }
        if (data.length < LENGTH) {
            throw new HandshakeException("truncated handshake (" + data.length + " bytes)");
        }
        if (b.getShort(6) != kind) {
            throw new HandshakeException("unexpected handshake kind " + b.getShort(6));
        }
        int slotSize = b.getInt(8);
        int credits = b.getInt(12);
        int maxFrame = b.getInt(16);
        int features = b.getInt(20) & READ_FEATURES;
        // every value sizes something of ours (fragments, the credit window, what we may write): out of range is a
        // protocol error that refuses this peer alone
        checkRange("receive slot size", slotSize, TransportConfig.MIN_SLOT_SIZE, TransportConfig.MAX_SLOT_SIZE);
        checkRange("initial credits", credits, 2, TransportConfig.MAX_RECEIVE_SLOTS + 1);
        checkRange("maximum frame size", maxFrame, TransportConfig.MIN_FRAME_SIZE, TransportConfig.MAX_FRAME_SIZE_LIMIT);
        int maxCredits = credits;
        if ((features & FEATURE_CREDIT_GROWTH) != 0) {
            if (data.length < ENCODED_LENGTH) {
                throw new HandshakeException("truncated handshake (" + data.length + " bytes): credit growth stated "
                        + "without its maximum");
            }
            maxCredits = b.getInt(LENGTH);
            // rdma_cm pads with zeros: 0 is a side that does not grant beyond its initial credits
            if (maxCredits == 0) {
                maxCredits = credits;
            }
            checkRange("maximum credits", maxCredits, credits, TransportConfig.MAX_RECEIVE_SLOTS + 1);
        }
        return new Params(slotSize, credits, maxFrame, features, maxCredits);
    }

    private static void checkRange(String what, int value, int min, int max) throws HandshakeException {
        if (value < min || value > max) {
            throw new HandshakeException("protocol error: invalid handshake: " + what + " " + value + " is outside "
                    + min + ".." + max);
        }
    }

    private static byte[] truncateUtf8(String s, int max) {
        byte[] all = s.getBytes(StandardCharsets.UTF_8);
        if (all.length <= max) {
            return all;
        }
        int n = max;
        while (n > 0 && (all[n] & 0xC0) == 0x80) {
            n--; // do not cut a multi-byte character in half
        }
        byte[] cut = new byte[n];
        System.arraycopy(all, 0, cut, 0, n);
        return cut;
    }

    /** A handshake that is not ours or not acceptable; the message says why. */
    public static final class HandshakeException extends Exception {
        public HandshakeException(String message) {
            super(message);
        }
    }
}
