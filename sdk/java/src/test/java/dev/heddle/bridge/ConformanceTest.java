package dev.heddle.bridge;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;

/** Heddle's conformance suite against the Java reference filter (make sdk-test sets heddle.bin). */
class ConformanceTest {
    @Test
    void referenceFilterPassesTheSuite() throws IOException, InterruptedException {
        String heddle = System.getProperty("heddle.bin", "");
        if (heddle.isEmpty()) {
            System.err.println("SKIPPED LOUDLY: -Dheddle.bin is not set, so the conformance suite did NOT run");
        }
        assumeTrue(!heddle.isEmpty(), "heddle.bin is not set");
        String cp = System.getProperty("surefire.test.class.path", System.getProperty("java.class.path"));
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        Process p = new ProcessBuilder(heddle, "bridge", "conformance", "--transports", "pipe,fifo,tcp,unix,shm", "--",
                java, "-XX:TieredStopAtLevel=1",
                "-Xshare:auto", "-cp", cp, ReferenceFilter.class.getName())
                .redirectErrorStream(true)
                .start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        System.out.println(out);
        assertEquals(0, p.waitFor(), out);
    }
}
