package dev.artemisrdma.it.bench;

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
}
