package dev.heddle.bridge;

/** Record codecs (spec/wire.md §5): how a record's bytes are read. */
public final class Codec {
    private Codec() {}

    public static final int RAW = 0x00;
    public static final int UTF8 = 0x01;
    public static final int ARROW_IPC = 0x03;
    public static final int JSON = 0x05;
    public static final int U8 = 0x10;
    public static final int I8 = 0x11;
    public static final int U16 = 0x12;
    public static final int I16 = 0x13;
    public static final int U32 = 0x14;
    public static final int I32 = 0x15;
    public static final int U64 = 0x16;
    public static final int I64 = 0x17;
    public static final int F32 = 0x18;
    public static final int F64 = 0x19;
    static final int PICKLE = 0x04;
}
