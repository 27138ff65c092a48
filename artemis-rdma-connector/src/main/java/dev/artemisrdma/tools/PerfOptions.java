package dev.artemisrdma.tools;

import java.util.HashMap;
import java.util.Map;
import java.util.Set;

/** Command-line options of {@link RdmaPerf}, validated with messages that say what is wrong. */
record PerfOptions(String command, String address, int port, String mode, int size, int iters, String layer,
                   int warmup, int settle) {

    /** The longest {@code --settle}: a warm-up that has not gone quiet by then measures the JIT anyway. */
    static final int MAX_SETTLE_SECONDS = 600;
    /** The largest {@code --size}: one frame's bytes. */
    static final int MAX_SIZE = 16 << 20;

    static final Set<String> MODES = Set.of("lat", "bw");
    static final Set<String> LAYERS = Set.of("verbs", "transport");

    static PerfOptions parse(String[] args) {
        if (args.length == 0 || !(args[0].equals("server") || args[0].equals("client"))) {
            throw new IllegalArgumentException("first argument must be 'server' or 'client'");
        }
        Map<String, String> values = new HashMap<>();
        for (int i = 1; i < args.length; i++) {
            String key = args[i];
            if (!key.startsWith("--") || i + 1 >= args.length) {
                throw new IllegalArgumentException("expected --key value, got '" + key + "'");
            }
            values.put(key.substring(2), args[++i]);
        }
        String command = args[0];
        Set<String> allowed = command.equals("server") ? Set.of("bind", "port")
                : Set.of("connect", "port", "mode", "size", "iters", "layer", "warmup", "settle");
        for (String key : values.keySet()) {
            if (!allowed.contains(key)) {
                throw new IllegalArgumentException("unknown option --" + key + " for " + command + " (valid: --"
                        + String.join(", --", allowed) + ")");
            }
        }
        String address = values.get(command.equals("server") ? "bind" : "connect");
        if (address == null) {
            throw new IllegalArgumentException(command.equals("server") ? "--bind ADDR is required"
                    : "--connect ADDR is required");
        }
        int port = intValue(values, "port", -1);
        if (port < 1 || port > 65534) {
            throw new IllegalArgumentException("--port must be 1..65534 (the transport layer uses PORT+1)");
        }
        String mode = values.getOrDefault("mode", "lat");
        String layer = values.getOrDefault("layer", "verbs");
        if (!MODES.contains(mode)) {
            throw new IllegalArgumentException("--mode must be lat or bw, got " + mode);
        }
        if (!LAYERS.contains(layer)) {
            throw new IllegalArgumentException("--layer must be verbs or transport, got " + layer);
        }
        int size = intValue(values, "size", 64);
        int iters = intValue(values, "iters", 10000);
        // at least 1: a settled stream marks the last frame of each window in its first byte (StreamAcks)
        if (size < 1 || size > MAX_SIZE) {
            throw new IllegalArgumentException("--size must be 1.." + MAX_SIZE + " bytes");
        }
        if (iters < 1) {
            throw new IllegalArgumentException("--iters must be positive");
        }
        int warmup = intValue(values, "warmup", Math.min(iters, 2000));
        if (warmup < 0) {
            throw new IllegalArgumentException("--warmup must be 0 or more");
        }
        // after the warm-up's count, go on in rehearsal windows until the JIT is quiet (at most this many seconds);
        // the transport layer only: its server echoes whatever comes (lat) or acknowledges the frames the client
        // marks as the last of a window (bw), where the verbs layer's server counts what the hello announced
        int settle = intValue(values, "settle", 0);
        if (settle < 0 || settle > MAX_SETTLE_SECONDS) {
            throw new IllegalArgumentException("--settle must be 0.." + MAX_SETTLE_SECONDS + " seconds");
        }
        if (settle > 0 && !layer.equals("transport")) {
            throw new IllegalArgumentException("--settle applies to --layer transport only (the verbs layer's "
                    + "server counts the messages the client announced, so it cannot run rehearsal windows)");
        }
        return new PerfOptions(command, address, port, mode, size, iters, layer, warmup, settle);
    }

    private static int intValue(Map<String, String> values, String key, int fallback) {
        String v = values.get(key);
        if (v == null) {
            return fallback;
        }
        try {
            return Integer.parseInt(v);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("--" + key + " must be a number, got '" + v + "'");
        }
    }
}
