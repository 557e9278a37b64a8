package dev.heddle.bridge;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The Java SDK against spec/bridge/ (spec/bridge.md §9), byte for byte. */
class VectorsTest {
    static final Path SPEC = Path.of(System.getProperty("spec.dir", "../../spec/bridge"));

    static JsonObject index() throws IOException {
        return JsonParser.parseString(Files.readString(SPEC.resolve("index.json"))).getAsJsonObject();
    }

    static byte[] read(String rel) throws IOException {
        return Files.readAllBytes(SPEC.resolve(rel));
    }

    /** A session writing into a buffer, framing as the SDK does. */
    static Session writer(ByteArrayOutputStream out, int edge, int framePayload) {
        Session s = new Session(new Channel(new ByteArrayInputStream(new byte[0]), out, null), "", "test");
        s.edge = edge;
        s.framePayload = framePayload;
        return s;
    }

    @Test
    void controlMessagesDecodeAndReencodeByteForByte() throws IOException {
        int n = 0;
        for (JsonElement e : index().getAsJsonArray("control")) {
            JsonObject v = e.getAsJsonObject();
            byte[] bytes = read(v.get("file").getAsString());
            JsonObject msg = v.getAsJsonObject("message");
            // decode: the payload after the 48-byte header is the message's JSON
            String json = new String(bytes, 48, bytes.length - 48, StandardCharsets.UTF_8);
            assertEquals(msg, JsonParser.parseString(json), v.get("name").getAsString());
            Wire.Json j = new Wire.Json(msg.get("type").getAsString());
            for (Map.Entry<String, JsonElement> m : msg.entrySet()) {
                if (m.getKey().equals("type")) continue;
                JsonElement x = m.getValue();
                if (x.isJsonArray()) {
                    List<String> list = new ArrayList<>();
                    x.getAsJsonArray().forEach(a -> list.add(a.getAsString()));
                    j.put(m.getKey(), list);
                } else if (x.getAsJsonPrimitive().isBoolean()) j.put(m.getKey(), x.getAsBoolean());
                else if (x.getAsJsonPrimitive().isNumber()) j.put(m.getKey(), x.getAsLong());
                else j.put(m.getKey(), x.getAsString());
            }
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            Session s = writer(out, v.get("edge").getAsInt(), 1 << 20);
            s.send(j);
            s.ch.out.flush();
            assertArrayEquals(bytes, out.toByteArray(), v.get("name").getAsString());
            n++;
        }
        assertTrue(n >= 15);
    }

    @Test
    void recordsReencodeByteForByte() throws IOException {
        for (JsonElement e : index().getAsJsonArray("records")) {
            JsonObject v = e.getAsJsonObject();
            if (v.has("credit")) continue;
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            Session s = writer(out, 7, v.get("frame_payload").getAsInt());
            s.writeMessage(Wire.KIND_DATA, v.get("codec").getAsInt(), v.get("tag").getAsInt(),
                    v.get("sequence").getAsLong(), HexFormat.of().parseHex(v.get("key_hex").getAsString()),
                    HexFormat.of().parseHex(v.get("payload_hex").getAsString()));
            s.ch.out.flush();
            assertArrayEquals(read(v.get("file").getAsString()), out.toByteArray(), v.get("name").getAsString());
        }
    }

    @Test
    void sessionsReplayByteForByte() throws IOException {
        JsonObject idx = index();
        for (JsonElement e : idx.getAsJsonArray("sessions")) {
            JsonObject v = e.getAsJsonObject();
            String name = v.get("name").getAsString();
            byte[] in = read("sessions/" + name + "/to_filter.bin");
            byte[] want = read("sessions/" + name + "/from_filter.bin");
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            int status = Bridge.runStreams(new ByteArrayInputStream(in), out, idx.get("token").getAsString(),
                    idx.get("language").getAsString(), new ReferenceFilter());
            assertEquals(v.get("exit_status").getAsInt(), status, name);
            byte[] got = out.toByteArray();
            if (!v.get("invalid").getAsBoolean()) {
                assertArrayEquals(want, got, name);
                continue;
            }
            String text = new String(got, StandardCharsets.ISO_8859_1);
            assertTrue(text.startsWith(new String(want, StandardCharsets.ISO_8859_1)), name);
            assertTrue(text.contains("\"code\":\"" + v.get("error_code").getAsString() + "\""), name + ": " + text);
        }
    }
}
