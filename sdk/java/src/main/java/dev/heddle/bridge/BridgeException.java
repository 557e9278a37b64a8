package dev.heddle.bridge;

import java.io.IOException;

/** A failure that ends the session with an ERROR of {@link #code()}. */
public final class BridgeException extends IOException {
    private static final long serialVersionUID = 1L;
    private final String code;
    private final long record;

    BridgeException(String code, String message, long record) {
        super(message);
        this.code = code;
        this.record = record;
    }

    static BridgeException protocol(String message) {
        return new BridgeException("PROTOCOL", message, -1);
    }

    /** VERSION, AUTH, PROTOCOL, RECORD_TOO_LARGE, INIT, PROCESS or FINALIZE. */
    public String code() {
        return code;
    }

    /** The input record that failed, or -1. */
    public long record() {
        return record;
    }
}
