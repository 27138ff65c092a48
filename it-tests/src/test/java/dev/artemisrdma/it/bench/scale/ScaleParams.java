package dev.artemisrdma.it.bench.scale;

import java.util.LinkedHashMap;
import java.util.Map;

/** {@code key=value} pairs separated by {@code ;} or {@code &} (as in acceptor and connector URLs). */
final class ScaleParams {

    private ScaleParams() {
    }

    static Map<String, Object> parse(String text) {
        Map<String, Object> params = new LinkedHashMap<>();
        for (String pair : text.split("[;&]")) {
            String p = pair.trim();
            if (p.isEmpty()) {
                continue;
            }
            int eq = p.indexOf('=');
            if (eq <= 0) {
                throw new IllegalArgumentException("not key=value: '" + p + "' in '" + text + "'");
            }
            params.put(p.substring(0, eq).trim(), p.substring(eq + 1).trim());
        }
        return params;
    }

    /** As a URL query: {@code ?k=v&k=v}, or "" when empty. */
    static String query(String text) {
        StringBuilder b = new StringBuilder();
        parse(text).forEach((k, v) -> b.append(b.length() == 0 ? '?' : '&').append(k).append('=').append(v));
        return b.toString();
    }
}
