package dev.artemisrdma.verbs;

import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * Compiles a C probe with gcc against the installed rdma-core headers and compares its offsetof/sizeof values with
 * the constants in {@link Abi}: the Java layout is checked against the real headers, not against itself.
 */
class AbiOffsetsTest {

    @Test
    void javaConstantsMatchTheInstalledHeaders() throws Exception {
        Path table = Paths.get("src/main/c/abi_table.h").toAbsolutePath();
        assertTrue(Files.exists(table), "abi table not found at " + table);
        Path dir = Files.createTempDirectory("abi-probe");
        Path source = dir.resolve("probe.c");
        Files.writeString(source, "#include <stdio.h>\n#include \"" + table + "\"\n"
                + "#define P(n, v) printf(\"%s=%ld\\n\", #n, (long)(v));\n"
                + "int main(void) { ABI_TABLE(P) return 0; }\n");
        Path binary = dir.resolve("probe");
        String compiled = run(new ProcessBuilder("gcc", "-o", binary.toString(), source.toString()));
        assertTrue(Files.exists(binary), "gcc failed (are libibverbs-dev and librdmacm-dev installed?):\n" + compiled);
        Map<String, Long> headers = new HashMap<>();
        for (String line : run(new ProcessBuilder(binary.toString())).split("\n")) {
            int eq = line.indexOf('=');
            if (eq > 0) {
                headers.put(line.substring(0, eq), Long.parseLong(line.substring(eq + 1).trim()));
            }
        }
        assertTrue(headers.size() > 100, "probe printed too little: " + headers);
        int compared = 0;
        for (Field field : Abi.class.getFields()) {
            if (!Modifier.isStatic(field.getModifiers()) || field.getName().equals("PORT_ATTR_BUFFER")) {
                continue;
            }
            Long expected = headers.get(field.getName());
            if (expected == null) {
                fail("Abi." + field.getName() + " is not in abi_table.h, so nothing checks it");
            }
            assertEquals(expected.longValue(), field.getLong(null), "Abi." + field.getName()
                    + " disagrees with the installed headers");
            compared++;
        }
        assertEquals(headers.size(), compared, "every probed value has a Java constant");
        assertTrue(Abi.PORT_ATTR_BUFFER >= 56, "port attr buffer must hold the v49+ struct");
    }

    private static String run(ProcessBuilder builder) throws IOException, InterruptedException {
        Process process = builder.redirectErrorStream(true).start();
        byte[] out = process.getInputStream().readAllBytes();
        assertTrue(process.waitFor(60, TimeUnit.SECONDS), "timed out: " + builder.command());
        return new String(out, StandardCharsets.UTF_8);
    }
}
