package dev.artemisrdma.it.artemis;

import java.nio.file.Path;

/**
 * A persistent broker from config/broker.xml in a process of its own, so a test can kill it (SIGKILL) and start
 * it again on the same journal. Prints {@value #READY} once serving.
 */
public final class LabBrokerMain {

    public static final String READY = "LAB BROKER READY";

    private LabBrokerMain() {
    }

    public static void main(String[] args) throws Exception {
        LabBroker broker = LabBroker.start(args[0], Integer.parseInt(args[1]), Path.of(args[2]), true, 0);
        System.out.println(READY);
        System.out.flush();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                broker.close();
            } catch (Exception ignored) {
                // exiting
            }
        }));
        Thread.currentThread().join();
    }
}
