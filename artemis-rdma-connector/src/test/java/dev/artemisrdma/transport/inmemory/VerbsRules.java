/*
 * The verbs rules of creating a queue pair and posting to it, written once for both in-memory fabrics: the caps a
 * device grants (depths rounded up to a power of two as rxe and mlx5 do, capped at the device's; more than it allows
 * refused with EINVAL), and what a post must respect (scatter-gather entries per request, inline bytes, immediate
 * data only where the device has it, outstanding requests against the queue's depth). Each check returns null when
 * the rule holds, else the refusal as the provider words it with its errno: the strict fabric records it as a
 * violation and throws, the fast one throws. Stateless; the checks allocate only when they refuse.
 */
package dev.artemisrdma.transport.inmemory;

import dev.artemisrdma.transport.fabric.QueuePairCaps;
import dev.artemisrdma.transport.fabric.QueuePairRefusedException;
import dev.artemisrdma.transport.fabric.QueuePairSpec;
import dev.artemisrdma.transport.fabric.SendList;

public final class VerbsRules {
    public static final int EINVAL = 22;
    public static final int ENOMEM = 12;

    private VerbsRules() {
    }

    /** What a device allows a queue pair. */
    public record DeviceCaps(int maxQpWr, int maxSge, int maxInlineData, boolean roundUp) {
    }

    /**
     * The caps {@code device} grants {@code spec} (no receive queue of its own on a shared receive queue); refused
     * (EINVAL) when it asks more than the device allows, inline bytes included, as providers refuse it.
     */
    public static QueuePairCaps grant(QueuePairSpec spec, DeviceCaps device) throws QueuePairRefusedException {
        if (spec.maxSendWr() > device.maxQpWr() || spec.maxRecvWr() > device.maxQpWr()
                || spec.maxSendSge() > device.maxSge() || spec.maxRecvSge() > device.maxSge()) {
            throw new QueuePairRefusedException("create_qp: " + spec + " exceeds device limits " + device
                    + " (EINVAL)");
        }
        if (spec.maxInlineData() > device.maxInlineData()) {
            throw new QueuePairRefusedException("create_qp: " + spec.maxInlineData() + " inline bytes (EINVAL)");
        }
        boolean onSrq = spec.sharedReceiveQueue() != null;
        return new QueuePairCaps(depth(spec.maxSendWr(), device), onSrq ? 0 : depth(spec.maxRecvWr(), device),
                spec.maxSendSge(), spec.maxRecvSge(), spec.maxInlineData());
    }

    /** Whether {@link #grant} refuses {@code spec} for its inline bytes alone. */
    public static boolean refusedForInline(QueuePairSpec spec, DeviceCaps device) {
        return spec.maxSendWr() <= device.maxQpWr() && spec.maxRecvWr() <= device.maxQpWr()
                && spec.maxSendSge() <= device.maxSge() && spec.maxRecvSge() <= device.maxSge()
                && spec.maxInlineData() > device.maxInlineData();
    }

    /** A queue's depth as the device grants {@code n}. */
    public static int depth(int n, DeviceCaps device) {
        return device.roundUp() ? Math.min(device.maxQpWr(), Integer.highestOneBit(Math.max(1, n - 1)) << 1) : n;
    }

    /** Why request {@code i} of {@code list} may not be posted on a queue pair of {@code caps}; null when it may. */
    public static String sendRefusal(SendList list, int i, QueuePairCaps caps, boolean immediateData, int qpn) {
        if (list.sgeCount(i) > caps.maxSendSge()) {
            return "postSend with " + list.sgeCount(i) + " sges, qp " + qpn + " allows " + caps.maxSendSge()
                    + ": ibv_post_send: too many sges (EINVAL " + EINVAL + ")";
        }
        if ((list.flags(i) & SendList.FLAG_IMMEDIATE) != 0 && !immediateData) {
            return "SEND_WITH_IMM on qp " + qpn + ": the device does not support immediate data: ibv_post_send: "
                    + "invalid opcode (EINVAL " + EINVAL + ")";
        }
        if ((list.flags(i) & SendList.FLAG_INLINE) != 0 && list.byteLength(i) > caps.maxInlineData()) {
            return "inline send of " + list.byteLength(i) + " bytes, qp " + qpn + " allows " + caps.maxInlineData()
                    + ": ibv_post_send: inline data too long (EINVAL " + EINVAL + ")";
        }
        return null;
    }

    /**
     * Why {@code posting} more requests may not join {@code outstanding} on a queue of {@code depth} (queue pair
     * {@code qpn}'s, or a shared receive queue's when {@code qpn} is negative); null when they may.
     */
    public static String depthRefusal(String verb, int qpn, int posting, int outstanding, int depth) {
        if (outstanding + posting <= depth) {
            return null;
        }
        return verb + " of " + posting + " with " + outstanding + " outstanding, "
                + (qpn < 0 ? "the shared receive queue" : "qp " + qpn) + " allows " + depth + ": " + verb
                + ": queue full (ENOMEM " + ENOMEM + ")";
    }
}
