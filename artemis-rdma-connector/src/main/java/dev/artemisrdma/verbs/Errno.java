package dev.artemisrdma.verbs;

import com.sun.jna.Native;
import com.sun.jna.Pointer;

/** Linux errno values: their symbols and texts, for messages like "ENOMEM (Cannot allocate memory)". */
public final class Errno {

    public static final int EPERM = 1;
    public static final int ENOENT = 2;
    public static final int EINTR = 4;
    public static final int EAGAIN = 11;
    public static final int ENOMEM = 12;
    public static final int EINVAL = 22;
    public static final int ENODEV = 19;
    public static final int EADDRNOTAVAIL = 99;
    public static final int ENETUNREACH = 101;
    public static final int ETIMEDOUT = 110;
    public static final int EHOSTUNREACH = 113;
    public static final int ECONNREFUSED = 111;
    public static final int EISCONN = 106;

    private static final String[] SYMBOLS = new String[134];

    static {
        String[] table = {
            "1 EPERM", "2 ENOENT", "3 ESRCH", "4 EINTR", "5 EIO", "6 ENXIO", "7 E2BIG", "9 EBADF", "11 EAGAIN",
            "12 ENOMEM", "13 EACCES", "14 EFAULT", "16 EBUSY", "17 EEXIST", "19 ENODEV", "22 EINVAL", "23 ENFILE",
            "24 EMFILE", "28 ENOSPC", "32 EPIPE", "34 ERANGE", "38 ENOSYS", "61 ENODATA", "62 ETIME", "71 EPROTO",
            "75 EOVERFLOW", "88 ENOTSOCK", "90 EMSGSIZE", "93 EPROTONOSUPPORT", "95 EOPNOTSUPP",
            "97 EAFNOSUPPORT", "98 EADDRINUSE", "99 EADDRNOTAVAIL", "100 ENETDOWN", "101 ENETUNREACH",
            "103 ECONNABORTED", "104 ECONNRESET", "105 ENOBUFS", "106 EISCONN", "107 ENOTCONN", "110 ETIMEDOUT",
            "111 ECONNREFUSED", "112 EHOSTDOWN", "113 EHOSTUNREACH", "114 EALREADY", "115 EINPROGRESS",
            "121 EREMOTEIO", "125 ECANCELED",
        };
        for (String entry : table) {
            int space = entry.indexOf(' ');
            SYMBOLS[Integer.parseInt(entry.substring(0, space))] = entry.substring(space + 1);
        }
    }

    private Errno() {
    }

    /** errno as the last native call on this thread left it (JNA preserves it across the call). */
    public static int last() {
        return Native.getLastError();
    }

    public static String symbol(int errno) {
        return errno > 0 && errno < SYMBOLS.length && SYMBOLS[errno] != null ? SYMBOLS[errno] : "errno " + errno;
    }

    public static String text(int errno) {
        try {
            long text = LibC.strerror(errno);
            return text == 0 ? "unknown error" : new Pointer(text).getString(0);
        } catch (Throwable e) {
            return "unknown error";
        }
    }

    /** "ENOMEM (Cannot allocate memory)". */
    public static String describe(int errno) {
        return symbol(errno) + " (" + text(errno) + ")";
    }
}
