package dev.artemisrdma.verbs;

import org.junit.jupiter.api.Test;

import java.io.File;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The start-up checks give a message that says what to do, on this machine whatever it has. */
class StartupChecksTest {

    private static boolean machineHasRdmaDevice() {
        String[] devices = new File("/sys/class/infiniband").list();
        return devices != null && devices.length > 0;
    }

    @Test
    void noRdmaDeviceIsReportedWithWhatToDo() {
        if (machineHasRdmaDevice()) {
            assertFalse(Rdma.checkDevices().isEmpty(), "devices listed where /sys/class/infiniband has some");
            return;
        }
        RdmaSetupException e = assertThrows(RdmaSetupException.class, Rdma::checkDevices);
        assertTrue(e.getMessage().contains("no RDMA device found"), e.getMessage());
        assertTrue(e.getMessage().contains("rdma link add"), e.getMessage());
    }

    @Test
    void librariesLoadAndTheAbiMatches() {
        Rdma.ensureReady(); // throws RdmaSetupException with package names when librdmacm/libibverbs are missing
        assertTrue(AbiCheck.mismatches().isEmpty());
    }
}
