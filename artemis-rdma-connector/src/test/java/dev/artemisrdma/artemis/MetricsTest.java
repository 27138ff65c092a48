package dev.artemisrdma.artemis;

import java.nio.file.Path;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The transport's meters and MBean under traffic over FakeFabric (MetricsScenario says what is checked). */
class MetricsTest {

    @TempDir
    Path dataDir;

    @Test
    void metersAndMBeanMoveUnderTrafficAndLeaveWithTheAcceptor() throws Exception {
        TestRuntime.install();
        MetricsScenario scenario = new MetricsScenario("127.0.0.1", 61748, dataDir);
        scenario.run();
        scenario.report().forEach(System.out::print);
    }
}
