package dev.heddle.bridge;

import java.io.IOException;
import java.nio.charset.StandardCharsets;

/** Sends results from {@link Filter#process} and {@link Filter#finalize}. */
public interface Emitter {
    /** Sends one record, waiting for credit if the host has granted none. */
    void emit(int codec, byte[] data, byte[] key) throws IOException;

    /** Sends a UTF-8 record. */
    default void text(String s, byte[] key) throws IOException {
        emit(Codec.UTF8, s.getBytes(StandardCharsets.UTF_8), key);
    }

    /** Sends an F64 array record. */
    default void doubles(byte[] key, double... values) throws IOException {
        emit(Codec.F64, Record.f64Bytes(values), key);
    }
}
