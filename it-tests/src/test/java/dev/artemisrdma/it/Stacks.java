package dev.artemisrdma.it;

import java.util.Map;

/** This JVM's thread stacks as text: what a lab test prints when something hangs, so the log says where. */
public final class Stacks {

    private Stacks() {
    }

    /** The stacks (12 frames each) of the threads whose name starts with {@code prefix} ("" for all). */
    public static String of(String prefix) {
        StringBuilder b = new StringBuilder();
        for (Map.Entry<Thread, StackTraceElement[]> e : Thread.getAllStackTraces().entrySet()) {
            if (!e.getKey().getName().startsWith(prefix)) {
                continue;
            }
            b.append("  thread ").append(e.getKey().getName()).append(" (").append(e.getKey().getState())
                    .append(")\n");
            StackTraceElement[] stack = e.getValue();
            for (int i = 0; i < Math.min(stack.length, 12); i++) {
                b.append("    at ").append(stack[i]).append('\n');
            }
        }
        return b.toString();
    }
}
