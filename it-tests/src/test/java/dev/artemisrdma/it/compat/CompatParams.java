package dev.artemisrdma.it.compat;

import java.util.HashMap;
import java.util.Map;

/**
 * Extra transport keys for the compatibility test's broker and client ({@code -Dcompat.params=key=value;...}), added
 * to the acceptor's or connector's parameters: on siw, the older builds need the inline bytes the device allows,
 * which they do not fit themselves to.
 */
final class CompatParams {

    static final String PROPERTY = "compat.params";

    private CompatParams() {
    }

    /** {@code base} with the keys of {@value #PROPERTY} added (a key already in {@code base} is refused). */
    static Map<String, Object> with(Map<String, Object> base) {
        Map<String, Object> params = new HashMap<>(base);
        String extra = System.getProperty(PROPERTY, "");
        for (String pair : extra.split(";")) {
            if (pair.isBlank()) {
                continue;
            }
            int eq = pair.indexOf('=');
            if (eq <= 0) {
                throw new IllegalArgumentException(PROPERTY + ": '" + pair + "' is not key=value");
            }
            if (params.putIfAbsent(pair.substring(0, eq).trim(), pair.substring(eq + 1).trim()) != null) {
                throw new IllegalArgumentException(PROPERTY + ": " + pair + " would replace a key the test sets");
            }
        }
        return params;
    }
}
