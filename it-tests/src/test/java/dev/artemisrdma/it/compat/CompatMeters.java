package dev.artemisrdma.it.compat;

import java.util.Map;
import java.util.TreeMap;

import io.micrometer.core.instrument.Meter;
import io.micrometer.core.instrument.MeterRegistry;

/**
 * The wire-feature meters an operator reads during a rolling upgrade, summed over their tags, as one report line:
 * {@code key=value} pairs, {@code absent} for a meter the build does not have (an older build has none of them).
 * Only Micrometer and meter names: this class runs against old and new connector jars alike.
 */
final class CompatMeters {

    /** Report keys and the meter names (without the acceptor's or the client's prefix) they sum. */
    private static final Map<String, String> KEYS = Map.of(
            "connections", "connections",
            "olderPeers", "connections.older.peers",
            "framesSent", "sent.frames",
            "framesReceived", "received.frames",
            "framesPacked", "sent.frames.packed",
            "immediateFragments", "sent.fragments.immediate");

    private CompatMeters() {
    }

    static String report(MeterRegistry registry, String prefix) {
        Map<String, String> values = new TreeMap<>();
        KEYS.forEach((key, meter) -> values.put(key, sum(registry, prefix + meter)));
        StringBuilder line = new StringBuilder();
        values.forEach((k, v) -> line.append(line.length() == 0 ? "" : " ").append(k).append('=').append(v));
        return line.toString();
    }

    private static String sum(MeterRegistry registry, String name) {
        double total = 0;
        boolean found = false;
        for (Meter meter : registry.find(name).meters()) {
            for (var m : meter.measure()) {
                total += m.getValue();
                found = true;
            }
        }
        return found ? Long.toString((long) total) : "absent";
    }
}
