package dev.artemisrdma.verbs;

import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.BasicFileAttributes;
import java.util.HashMap;
import java.util.Map;

/**
 * Tells, for the price of a directory listing, whether the kernel's RDMA devices may have changed: the entries of
 * {@code /sys/class/infiniband_verbs} (one {@code uverbsN} link per device that user space can open), each with its
 * inode number.
 *
 * <p>Why: {@code rdma_get_devices} rescans every device (netlink, sysfs, opening the device files); under the lab's
 * emulation that took about 4 ms, once a second, the transport's largest cost while idle. A device's uverbs entry
 * appears when it is registered and is deleted first thing when it is removed, before the kernel waits for
 * processes to close it (ib_uverbs_remove_one), so a removal or an addition changes the names; a device removed and
 * another added under the same name within one look changes the inode (sysfs makes a new node). Anything this
 * cannot read (no sysfs, another layout) counts as changed, so the caller rescans as if there were no watch.
 */
public final class DeviceListWatch {

    /** Where libibverbs itself finds the devices it lists. */
    public static final Path UVERBS_CLASS = Path.of("/sys/class/infiniband_verbs");

    private final Path dir;
    private Map<String, Object> last;

    public DeviceListWatch() {
        this(UVERBS_CLASS);
    }

    /** Watches {@code dir} instead (tests). */
    public DeviceListWatch(Path dir) {
        this.dir = dir;
    }

    /**
     * Whether the entries differ from the previous call's (true on the first call, and whenever they cannot be
     * read). Not thread-safe: one caller, the thread that rescans.
     */
    public boolean changed() {
        Map<String, Object> now = read();
        boolean changed = now == null || !now.equals(last);
        last = now;
        return changed;
    }

    /** Name to file key (device and inode) of each entry, or null when the directory cannot be read. */
    private Map<String, Object> read() {
        Map<String, Object> entries = new HashMap<>();
        try (DirectoryStream<Path> stream = Files.newDirectoryStream(dir)) {
            for (Path entry : stream) {
                BasicFileAttributes a = Files.readAttributes(entry, BasicFileAttributes.class,
                        LinkOption.NOFOLLOW_LINKS);
                Object key = a.fileKey();
                if (key == null) {
                    return null; // no inode to tell a re-created entry by: cannot tell
                }
                entries.put(entry.getFileName().toString(), key);
            }
            return entries;
        } catch (IOException | RuntimeException e) {
            return null;
        }
    }
}
