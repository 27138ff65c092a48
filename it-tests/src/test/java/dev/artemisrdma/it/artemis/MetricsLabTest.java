package dev.artemisrdma.it.artemis;

import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

import dev.artemisrdma.artemis.MetricsScenario;
import dev.artemisrdma.it.Lab;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The transport's Micrometer meters and JMX MBean on the real rxe fabric: a broker with a Prometheus metrics plugin,
 * a JMS client with its own registry, traffic, then the acceptor stopped (MetricsScenario says what is checked;
 * each counter that stays at zero under traffic fails it). The meters must also agree with rxe: the packets the
 * devices sent carried at least the bytes our counters claim.
 */
@Timeout(value = 600, unit = TimeUnit.SECONDS)
class MetricsLabTest {

    private static final Path DEVICES = Path.of("/sys/class/infiniband");

    @Test
    void metersAndMBeanOnTheRealFabric() throws Exception {
        long packetsBefore = rxeSentPackets();
        MetricsScenario scenario = new MetricsScenario(Lab.addr0(), Lab.freshPort(),
                Files.createTempDirectory("lab-metrics"));
        scenario.run();
        long packets = rxeSentPackets() - packetsBefore;
        // rxe's MTU is at most 4096 bytes: fewer packets could not have carried what our counters say was sent
        assertTrue(packets * 4096 >= scenario.bytesSent(), "rxe sent " + packets + " packets, the transport's meters"
                + " claim " + (long) scenario.bytesSent() + " bytes");
        System.out.println("MetricsLabTest: rxe sent " + packets + " packets for " + (long) scenario.bytesSent()
                + " payload bytes; Prometheus scrape after the traffic:");
        scenario.report().forEach(System.out::print);
    }

    /** Packets sent by every RDMA device, from rxe's hw_counters. */
    private static long rxeSentPackets() throws IOException {
        if (!Files.isDirectory(DEVICES)) {
            fail("no RDMA device (" + DEVICES + " is missing): this test runs in the Soft-RoCE lab");
        }
        long sum = 0;
        try (Stream<Path> devices = Files.list(DEVICES)) {
            for (Path device : (Iterable<Path>) devices::iterator) {
                Path counter = device.resolve("ports/1/hw_counters/sent_pkts");
                if (!Files.isReadable(counter)) {
                    fail(counter + " is not readable: the lab's rxe devices export their counters there");
                }
                sum += Long.parseLong(Files.readString(counter).trim());
            }
        }
        return sum;
    }
}
