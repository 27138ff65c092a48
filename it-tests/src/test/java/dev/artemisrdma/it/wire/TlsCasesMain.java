package dev.artemisrdma.it.wire;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * {@link TlsProbeMain}'s round trip for several URLs in one JVM (each JVM start costs the lab about 10 s): for each
 * case prints {@code CASE label}, what the client logs while it tries (the reason a TLS handshake failed is only in
 * the log: Artemis's Netty connector logs it as AMQ214016, the RDMA connector as a WARN of the outage; both then
 * throw the same AMQ219007), then {@code VERDICT label} and the round trip's verdict. Standard error goes to standard
 * output, so that every log line lands between its case's two lines. Arguments: the queue, then pairs of label and
 * URL ({@code rdma://} or {@code tcp://}).
 */
public final class TlsCasesMain {

    static final String CASE = "CASE ";
    static final String VERDICT = "VERDICT ";
    static final String DONE = "CASES DONE";

    private TlsCasesMain() {
    }

    public static void main(String[] args) {
        System.setErr(System.out); // before any logger: slf4j-simple writes to whatever System.err is at each line
        for (int i = 1; i + 1 < args.length; i += 2) {
            System.out.println(CASE + args[i]);
            System.out.flush();
            String verdict = TlsProbeMain.roundTrip(args[i + 1], args[0]);
            System.out.println(VERDICT + args[i] + " " + verdict);
            System.out.flush();
        }
        System.out.println(DONE);
        System.out.flush();
        System.exit(0);
    }

    /** One case's outcome as the output shows it: the verdict and everything printed while it ran. */
    record Outcome(String verdict, String output) {

        boolean served() {
            return verdict.startsWith("SERVED");
        }
    }

    /** The outcomes in {@code lines} (this program's output), by label. */
    static Map<String, Outcome> parse(List<String> lines) {
        Map<String, Outcome> outcomes = new LinkedHashMap<>();
        String label = null;
        List<String> during = new ArrayList<>();
        for (String line : lines) {
            if (line.startsWith(CASE)) {
                label = line.substring(CASE.length());
                during.clear();
            } else if (label != null && line.startsWith(VERDICT + label + " ")) {
                outcomes.put(label, new Outcome(line.substring(VERDICT.length() + label.length() + 1),
                        String.join("\n", during)));
                label = null;
            } else if (label != null) {
                during.add(line);
            }
        }
        return outcomes;
    }
}
