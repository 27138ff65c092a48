package dev.artemisrdma.verbs;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * A device whose async events cannot be read costs only itself. Before, {@code AsyncEventReader.poll} read the ready
 * devices in one loop that threw at the first failing one: the events already read (from devices before it, and from
 * it) were dropped with the local list, the devices after it were not read, and the caller logged a WARN and slept
 * 100 ms, every round, for as long as the device failed.
 */
class DeviceReadsTest {

    private static IbvAsyncEvent event(IbvEventType type, int port) {
        return new IbvAsyncEvent(null, type, type.ordinal(), port, -1, 0, 0);
    }

    /** Each device's events; "broken" yields one event, then fails; "silent" is ready but has nothing. */
    private static final DeviceReads.Reader<String> READER = (device, out) -> {
        switch (device) {
            case "broken" -> {
                out.add(event(IbvEventType.PORT_ERR, 9));
                throw new VerbsException("ibv_get_async_event", 5, "on broken");
            }
            case "silent" -> {
                return 0;
            }
            default -> {
                out.add(event(IbvEventType.PORT_ACTIVE, device.equals("a") ? 1 : 2));
                return 1;
            }
        }
    };

    @Test
    void aDeviceWhoseReadFailsCostsOnlyItself() {
        DeviceReads<String> reads = new DeviceReads<>();
        List<IbvAsyncEvent> out = new ArrayList<>();
        List<DeviceReads.Failure<String>> failed = reads.read(List.of("a", "broken", "b"), READER, out);
        assertEquals(List.of(1, 9, 2), out.stream().map(IbvAsyncEvent::portNumber).toList(),
                "a's event, broken's before it failed, and b's, read after it");
        assertEquals(1, failed.size());
        assertEquals("broken", failed.get(0).device());
        assertEquals(1, failed.get(0).inARow());
        assertFalse(failed.get(0).givenUp());
    }

    @Test
    void aDeviceThatKeepsFailingIsGivenUpSoItCannotSpinTheThread() {
        DeviceReads<String> reads = new DeviceReads<>();
        Map<String, Integer> givenUpAt = new java.util.HashMap<>();
        for (int round = 1; round <= DeviceReads.GIVE_UP_AFTER; round++) {
            for (DeviceReads.Failure<String> f : reads.read(List.of("broken", "silent", "a"), READER,
                    new ArrayList<>())) {
                assertEquals(round, f.inARow());
                if (f.givenUp()) {
                    givenUpAt.put(f.device(), round);
                }
            }
        }
        assertEquals(Map.of("broken", DeviceReads.GIVE_UP_AFTER, "silent", DeviceReads.GIVE_UP_AFTER), givenUpAt,
                "a device that throws, and one poll(2) calls ready that never has an event (POLLERR, POLLNVAL)");
    }

    @Test
    void aReadThatBringsAnEventClearsTheCount() {
        DeviceReads<String> reads = new DeviceReads<>();
        boolean[] broken = {true};
        DeviceReads.Reader<String> flaky = (device, out) -> {
            if (broken[0]) {
                throw new VerbsException("transient");
            }
            out.add(event(IbvEventType.PORT_ACTIVE, 1));
            return 1;
        };
        for (int i = 0; i < DeviceReads.GIVE_UP_AFTER - 1; i++) {
            reads.read(List.of("x"), flaky, new ArrayList<>());
        }
        broken[0] = false;
        assertTrue(reads.read(List.of("x"), flaky, new ArrayList<>()).isEmpty());
        broken[0] = true;
        assertEquals(1, reads.read(List.of("x"), flaky, new ArrayList<>()).get(0).inARow(), "counted afresh");
    }
}
