package dev.artemisrdma.it;

import java.util.ArrayList;
import java.util.List;
import java.util.StringJoiner;

/**
 * What is wrong with a received sequence that should be 0, 1, ..., count-1, said in one line: a lab failure's message
 * is all that CI shows of it, and a list of thousands of numbers cut at 300 characters names nothing.
 */
public final class Sequences {

    private static final int SHOWN = 8;

    private Sequences() {
    }

    /** Null when {@code received} is exactly 0..count-1; otherwise where it breaks, what is missing and what repeats. */
    public static String problemWith(int count, List<Integer> received) {
        int[] seen = new int[count];
        List<Integer> foreign = new ArrayList<>();
        for (int seq : received) {
            if (seq >= 0 && seq < count) {
                seen[seq]++;
            } else {
                foreign.add(seq);
            }
        }
        List<Integer> missing = new ArrayList<>();
        List<Integer> repeated = new ArrayList<>();
        for (int seq = 0; seq < count; seq++) {
            if (seen[seq] == 0) {
                missing.add(seq);
            } else if (seen[seq] > 1) {
                repeated.add(seq);
            }
        }
        List<String> inversions = new ArrayList<>();
        int inversionCount = 0;
        for (int i = 1; i < received.size(); i++) {
            if (received.get(i) <= received.get(i - 1)) {
                inversionCount++;
                if (inversions.size() < SHOWN) {
                    inversions.add("#" + i + ": " + received.get(i - 1) + " then " + received.get(i));
                }
            }
        }
        if (missing.isEmpty() && repeated.isEmpty() && foreign.isEmpty() && inversionCount == 0
                && received.size() == count) {
            return null;
        }
        return received.size() + " received of " + count + "; missing " + few(missing) + "; more than once "
                + few(repeated) + "; out of range " + few(foreign) + "; " + inversionCount
                + " steps back (position: previous then this) " + inversions + "; around the first: "
                + around(received, firstBreak(received));
    }

    private static int firstBreak(List<Integer> received) {
        for (int i = 0; i < received.size(); i++) {
            if (received.get(i) != i) {
                return i;
            }
        }
        return received.size();
    }

    private static String around(List<Integer> received, int at) {
        int from = Math.max(0, at - 3);
        int to = Math.min(received.size(), at + 6);
        return "#" + from + ".." + (to - 1) + " = " + received.subList(from, to);
    }

    private static String few(List<Integer> values) {
        if (values.isEmpty()) {
            return "none";
        }
        StringJoiner shown = new StringJoiner(", ", values.size() + " [", values.size() > SHOWN ? ", ...]" : "]");
        values.stream().limit(SHOWN).forEach(v -> shown.add(Integer.toString(v)));
        return shown.toString();
    }
}
