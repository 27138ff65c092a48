package dev.artemisrdma.transport.wire;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import org.junit.jupiter.api.Test;

import dev.artemisrdma.transport.fabric.FabricException;

class CodecTest {

    @Test
    void handshakeRoundTripsAndFitsInPrivateData() throws Exception {
        Handshake.Params p = new Handshake.Params(16384, 65, 64 << 20);
        byte[] connect = Handshake.encodeConnect(p);
        byte[] accept = Handshake.encodeAccept(p);
        assertTrue(connect.length <= 56 && accept.length <= 196);
        assertEquals(p, Handshake.decodeConnect(connect));
        assertEquals(p, Handshake.decodeAccept(accept));
        // rdma_cm pads private data with zeros: still decodes
        byte[] padded = java.util.Arrays.copyOf(connect, 56);
        assertEquals(p, Handshake.decodeConnect(padded));
    }

    @Test
    void featuresAreNegotiatedInTheFormerlyReservedWord() throws Exception {
        Handshake.Params packing = new Handshake.Params(16384, 65, 64 << 20, Handshake.FEATURE_PACKED);
        assertTrue(Handshake.decodeAccept(Handshake.encodeAccept(packing)).readsPacked());
        // a peer from before packing wrote 0 at offset 20 (and rdma_cm pads with zeros): it reads no packed SENDs
        byte[] old = Handshake.encodeConnect(new Handshake.Params(16384, 65, 64 << 20));
        assertEquals(0, ByteBuffer.wrap(old).getInt(20));
        assertFalse(Handshake.decodeConnect(old).readsPacked());
        // bits this side does not know (a newer peer's features) are ignored, not refused; TLS (bit 5) is read
        byte[] newer = Handshake.encodeConnect(packing);
        ByteBuffer.wrap(newer).putInt(20, 0xFFFF_FFFF);
        assertEquals(Handshake.FEATURE_PACKED | Handshake.FEATURE_CREDIT_GROWTH
                | Handshake.FEATURE_IMMEDIATE_FRAGMENTS | Handshake.FEATURE_CREDIT_RECALL
                | Handshake.FEATURE_IMMEDIATE_WHOLE | Handshake.FEATURE_TLS, Handshake.decodeConnect(newer).features());
        assertTrue(Handshake.decodeConnect(newer).speaksTls());
        assertFalse(Handshake.decodeConnect(old).speaksTls());
        assertTrue(Handshake.decodeConnect(newer).answersCreditRecall());
        assertFalse(Handshake.decodeConnect(old).readsImmediateFragments());
        assertFalse(Handshake.decodeConnect(old).answersCreditRecall());
        ByteBuffer.wrap(newer).putInt(20, 0xFFFF_FFFE);
        assertFalse(Handshake.decodeConnect(newer).readsPacked());
    }

    @Test
    void fragmentImmediateDataRoundTrips() throws Exception {
        for (int length : new int[] {0, 1, 65536, Integer.MAX_VALUE}) {
            int imm = ImmediateHeader.first(length);
            assertTrue(ImmediateHeader.isFirst(imm));
            assertEquals(length, ImmediateHeader.frameLength(imm));
        }
        int imm = ImmediateHeader.continuation(true, FrameHeader.HINT_CREDIT_WANTED, FrameHeader.MAX_CREDITS);
        assertFalse(ImmediateHeader.isFirst(imm));
        assertTrue(ImmediateHeader.isLast(imm));
        assertTrue(ImmediateHeader.creditWanted(imm));
        assertEquals(FrameHeader.MAX_CREDITS, ImmediateHeader.credits(imm));
        ImmediateHeader.checkContinuation(imm);
        imm = ImmediateHeader.continuation(false, 0, 7);
        assertFalse(ImmediateHeader.isLast(imm) || ImmediateHeader.creditWanted(imm));
        assertEquals(7, ImmediateHeader.credits(imm));
        org.junit.jupiter.api.Assertions.assertThrows(FabricException.class,
                () -> ImmediateHeader.checkContinuation(1 << 16));
    }

    @Test
    void packedPayloadsAreValidatedBeforeAnyFrameIsDelivered() throws Exception {
        ByteBuffer b = ByteBuffer.allocate(64);
        int end = PackedFrames.put(b, 0, ByteBuffer.wrap(new byte[] {1, 2, 3}), 3);
        end = PackedFrames.put(b, end, ByteBuffer.wrap(new byte[0]), 0);
        end = PackedFrames.put(b, end, ByteBuffer.wrap(new byte[] {9}), 1);
        assertEquals(3 * PackedFrames.ENTRY_HEADER + 4, end);
        PackedFrames.validate(b, 0, end, 3, 16);
        java.util.List<Integer> seen = new java.util.ArrayList<>();
        PackedFrames.forEach(b, 0, end, 3, f -> {
            seen.add(f.remaining());
            f.position(f.limit()).limit(0); // a sink that consumes and narrows the view cannot derail the next frame
        });
        assertEquals(java.util.List.of(3, 0, 1), seen);
        int last = end;
        assertThrows(FabricException.class, () -> PackedFrames.validate(b, 0, last, 4, 16), "more frames than held");
        assertThrows(FabricException.class, () -> PackedFrames.validate(b, 0, last, 2, 16), "bytes after the last");
        assertThrows(FabricException.class, () -> PackedFrames.validate(b, 0, last, 3, 2), "beyond the maximum frame");
        assertThrows(FabricException.class, () -> PackedFrames.validate(b, 0, last - 1, 3, 16), "past the SEND");
        assertThrows(FabricException.class, () -> PackedFrames.validate(b, 0, last, 0, 16), "no frames");
    }

    @Test
    void foreignOrOtherVersionHandshakesAreRefusedWithAReason() {
        byte[] data = Handshake.encodeConnect(new Handshake.Params(4096, 9, 1 << 20));
        ByteBuffer.wrap(data).putShort(4, (short) 9);
        Handshake.HandshakeException e = assertThrows(Handshake.HandshakeException.class,
                () -> Handshake.decodeConnect(data));
        assertTrue(e.getMessage().startsWith("unsupported protocol version 9"), e.getMessage());

        e = assertThrows(Handshake.HandshakeException.class, () -> Handshake.decodeConnect(new byte[56]));
        assertTrue(e.getMessage().contains("not an artemis-rdma peer"), e.getMessage());
        e = assertThrows(Handshake.HandshakeException.class, () -> Handshake.decodeConnect(new byte[0]));
        assertTrue(e.getMessage().contains("not an artemis-rdma peer"), e.getMessage());

        byte[] accept = Handshake.encodeAccept(new Handshake.Params(4096, 9, 1 << 20));
        e = assertThrows(Handshake.HandshakeException.class, () -> Handshake.decodeConnect(accept));
        assertTrue(e.getMessage().contains("kind"), e.getMessage());

        byte[] bad = Handshake.encodeConnect(new Handshake.Params(4, 9, 1 << 20));
        e = assertThrows(Handshake.HandshakeException.class, () -> Handshake.decodeConnect(bad));
        assertTrue(e.getMessage().contains("slot size 4"), e.getMessage());
    }

    @Test
    void rejectReasonRoundTripsWithinTheLimit() {
        assertEquals("unsupported protocol version 9", Handshake.decodeReject(
                Handshake.encodeReject("unsupported protocol version 9")));
        String longReason = "é".repeat(200);
        byte[] enc = Handshake.encodeReject(longReason);
        assertTrue(enc.length <= 148, "reject data " + enc.length);
        String dec = Handshake.decodeReject(enc);
        assertTrue(longReason.startsWith(dec) && dec.length() > 60, dec);
        assertEquals("no reason given", Handshake.decodeReject(new byte[0]));
        assertTrue(Handshake.decodeReject(new byte[] {1, 2, 3}).contains("foreign"));
    }

    @Test
    void frameHeaderRoundTrips() {
        ByteBuffer b = ByteBuffer.allocateDirect(32);
        FrameHeader.write(b, 8, FrameHeader.FIRST | FrameHeader.LAST, 65535, 123456789);
        assertEquals(FrameHeader.FIRST | FrameHeader.LAST, FrameHeader.flags(b, 8));
        assertEquals(65535, FrameHeader.credits(b, 8));
        assertEquals(123456789, FrameHeader.lengthOrOffset(b, 8));
        FrameHeader.write(b, 0, FrameHeader.CREDIT | FrameHeader.CLOSE, 0, 0);
        assertEquals(FrameHeader.CREDIT | FrameHeader.CLOSE, FrameHeader.flags(b, 0));
        assertEquals(0, FrameHeader.credits(b, 0));
        assertThrows(IllegalArgumentException.class, () -> FrameHeader.write(b, 0, 0, 65536, 0));
    }
}
