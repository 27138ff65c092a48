package dev.artemisrdma.verbs;

import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;

class ErrnoTest {

    @Test
    void describesErrnoWithSymbolAndText() {
        assertEquals("ENOMEM (Cannot allocate memory)", Errno.describe(Errno.ENOMEM));
        assertEquals("ETIMEDOUT (Connection timed out)", Errno.describe(Errno.ETIMEDOUT));
    }

    @Test
    void verbsExceptionNamesVerbErrnoAndText() {
        VerbsException e = new VerbsException("rdma_post_sendv", Errno.ENOMEM, "");
        assertEquals("rdma_post_sendv failed: ENOMEM (Cannot allocate memory)", e.getMessage());
        assertEquals(Errno.ENOMEM, e.errno());
    }

    @Test
    void lastErrorIsPreservedAcrossDirectMappedCalls() {
        // fcntl on an invalid fd fails with EBADF; JNA must hand errno back to Java.
        assertEquals(-1, LibC.fcntl(-1, LibC.F_GETFL, 0));
        assertEquals(9, Errno.last());
        assertEquals("EBADF", Errno.symbol(Errno.last()));
    }
}
