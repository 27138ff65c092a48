package dev.artemisrdma.it.bench;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/** The benchmarks' knobs, read from the environment the way the bench scripts document them. */
final class BenchEnv {

    private BenchEnv() {
    }

    /** The variable's value, trimmed, or {@code fallback} when it is unset or blank. */
    static String env(String name, String fallback) {
        String value = System.getenv(name);
        return value == null || value.isBlank() ? fallback : value.trim();
    }

    /** The variable's words, separated by spaces or commas. */
    static List<String> words(String name, String fallback) {
        return Arrays.asList(env(name, fallback).split("[\\s,]+"));
    }

    /** {@code value} as a positive whole number, or an error naming the variable. */
    static int positive(String name, String value) {
        try {
            int n = Integer.parseInt(value);
            if (n > 0) {
                return n;
            }
        } catch (NumberFormatException e) {
            // reported below
        }
        throw new IllegalArgumentException(name + " takes positive whole numbers, got '" + value + "'");
    }

    /** DELIVERY ("nonpersistent persistent"): true for persistent, in the order given. */
    static List<Boolean> deliveries() {
        List<Boolean> deliveries = new ArrayList<>();
        for (String d : words("DELIVERY", "nonpersistent persistent")) {
            if (!d.equals("nonpersistent") && !d.equals("persistent")) {
                throw new IllegalArgumentException("DELIVERY takes nonpersistent and/or persistent, got '" + d + "'");
            }
            deliveries.add(d.equals("persistent"));
        }
        return deliveries;
    }

    /** PAIRS ("1 16"): the producer/consumer pair counts, in the order given. */
    static List<Integer> pairs() {
        List<Integer> pairs = new ArrayList<>();
        for (String p : words("PAIRS", "1 16")) {
            pairs.add(positive("PAIRS", p));
        }
        return pairs;
    }
}
