package dev.artemisrdma.verbs;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

class DeviceListWatchTest {

    @TempDir
    Path dir;

    @Test
    void firstLookCountsAsAChangeAndAnUnchangedListingDoesNot() throws Exception {
        Files.createFile(dir.resolve("uverbs0"));
        Files.writeString(dir.resolve("abi_version"), "6");
        DeviceListWatch watch = new DeviceListWatch(dir);
        assertTrue(watch.changed(), "nothing to compare with yet");
        assertFalse(watch.changed());
        assertFalse(watch.changed());
    }

    @Test
    void anAddedOrRemovedDeviceIsAChange() throws Exception {
        Files.createFile(dir.resolve("uverbs0"));
        DeviceListWatch watch = new DeviceListWatch(dir);
        watch.changed();
        Files.createFile(dir.resolve("uverbs1"));
        assertTrue(watch.changed(), "added");
        assertFalse(watch.changed());
        Files.delete(dir.resolve("uverbs0"));
        assertTrue(watch.changed(), "removed");
        assertFalse(watch.changed());
    }

    @Test
    void aDeviceReplacedUnderTheSameNameIsAChange() throws Exception {
        Files.createFile(dir.resolve("uverbs0"));
        DeviceListWatch watch = new DeviceListWatch(dir);
        watch.changed();
        // the new entry exists while the old one does, so it cannot get the old inode number back
        Path replacement = Files.createFile(dir.resolve("new"));
        Files.move(replacement, dir.resolve("uverbs0"), StandardCopyOption.REPLACE_EXISTING);
        assertTrue(watch.changed(), "same name, another inode");
    }

    @Test
    void aListingThatCannotBeReadAlwaysCountsAsChanged() {
        DeviceListWatch watch = new DeviceListWatch(dir.resolve("absent"));
        assertTrue(watch.changed());
        assertTrue(watch.changed(), "cannot tell: the caller must rescan");
    }
}
