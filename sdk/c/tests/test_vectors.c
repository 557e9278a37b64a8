/* The C SDK against spec/bridge/ (spec/bridge.md §9): control messages and records decoded
 * and re-encoded byte for byte, sessions replayed byte for byte. Usage: test_vectors SPECDIR */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "reference.h"

static const char *DIR_;
static int failures;

#define CHECK(cond, ...)                                                                   \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                           \
            fprintf(stderr, __VA_ARGS__);                                                  \
            fputc('\n', stderr);                                                           \
            failures++;                                                                    \
        }                                                                                  \
    } while (0)

static uint8_t *slurp(const char *rel, size_t *len) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", DIR_, rel);
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", path);
        exit(1);
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *p = malloc((size_t)n + 1);
    if (!p || fread(p, 1, (size_t)n, f) != (size_t)n) exit(1);
    fclose(f);
    p[n] = 0;
    *len = (size_t)n;
    return p;
}

/* Reassembles the last message in `bytes` (the only one, for a single-message vector);
 * returns how many messages there were, or -1. */
static int last_message(const uint8_t *bytes, size_t len, hb_header *first, hb_buf *key,
                        hb_buf *payload) {
    size_t at = 0;
    int n = 0;
    while (at + HB_HEADER_LEN <= len) {
        hb_header h;
        if (hb_header_decode(bytes + at, &h)) return -1;
        if (at + HB_HEADER_LEN + h.key_len + h.frag_len > len) return -1;
        if (h.flags & HB_FIRST) {
            n++;
            *first = h;
            key->len = payload->len = 0;
            hb_buf_put(key, bytes + at + HB_HEADER_LEN, h.key_len);
        }
        hb_buf_put(payload, bytes + at + HB_HEADER_LEN + h.key_len, h.frag_len);
        at += HB_HEADER_LEN + h.key_len + h.frag_len;
    }
    return at == len ? n : -1;
}

/* Frames one message exactly as the SDK's session writes it. */
static uint8_t *sdk_frames(uint32_t edge, uint32_t frame_payload, uint8_t kind, uint8_t codec,
                           uint32_t tag, uint64_t seq, const hb_buf *key, const hb_buf *payload,
                           size_t *len) {
    FILE *tmp = tmpfile();
    hb_session s;
    memset(&s, 0, sizeof s);
    s.edge = edge;
    s.frame_payload = frame_payload;
    s.ch.wfd = fileno(tmp);
    hb_write_message(&s, kind, codec, tag, seq, key->p, key->len, payload->p, payload->len);
    hb_channel_flush(&s.ch);
    hb_buf_free(&s.ch.out);
    long n = lseek(fileno(tmp), 0, SEEK_CUR);
    uint8_t *out = malloc((size_t)n + 1);
    lseek(fileno(tmp), 0, SEEK_SET);
    if (!out || read(fileno(tmp), out, (size_t)n) != n) exit(1);
    fclose(tmp);
    *len = (size_t)n;
    return out;
}

static void hex_into(hb_buf *b, const char *hex) {
    for (size_t i = 0; hex[i] && hex[i + 1]; i += 2) {
        unsigned v;
        sscanf(hex + i, "%2x", &v);
        uint8_t byte = (uint8_t)v;
        hb_buf_put(b, &byte, 1);
    }
}

static void record_vectors(const cJSON *list) {
    const cJSON *v;
    int n = 0;
    cJSON_ArrayForEach(v, list) {
        const char *name = cJSON_GetObjectItem(v, "name")->valuestring;
        size_t len;
        uint8_t *bytes = slurp(cJSON_GetObjectItem(v, "file")->valuestring, &len);
        hb_header h;
        hb_buf key = {0}, payload = {0}, want_key = {0}, want_payload = {0};
        CHECK(last_message(bytes, len, &h, &key, &payload) == 1, "%s: not one message", name);
        const cJSON *credit = cJSON_GetObjectItem(v, "credit");
        if (credit) {
            uint32_t got = payload.len == 4 ? (uint32_t)(payload.p[0] | payload.p[1] << 8 |
                                                         payload.p[2] << 16 | (uint32_t)payload.p[3] << 24)
                                            : 0;
            CHECK(h.kind == HB_KIND_CREDIT && got == (uint32_t)credit->valuedouble, "%s", name);
        } else {
            hex_into(&want_key, cJSON_GetObjectItem(v, "key_hex")->valuestring);
            hex_into(&want_payload, cJSON_GetObjectItem(v, "payload_hex")->valuestring);
            CHECK(h.kind == HB_KIND_DATA && h.codec == (uint8_t)cJSON_GetObjectItem(v, "codec")->valuedouble &&
                      h.tag == (uint32_t)cJSON_GetObjectItem(v, "tag")->valuedouble &&
                      h.seq == (uint64_t)cJSON_GetObjectItem(v, "sequence")->valuedouble,
                  "%s: header fields", name);
            CHECK(key.len == want_key.len && !memcmp(key.p, want_key.p, key.len), "%s: key", name);
            CHECK(payload.len == want_payload.len && !memcmp(payload.p, want_payload.p, payload.len),
                  "%s: payload", name);
            size_t out_len;
            uint8_t *out = sdk_frames(7, (uint32_t)cJSON_GetObjectItem(v, "frame_payload")->valuedouble,
                                      HB_KIND_DATA, h.codec, h.tag, h.seq, &key, &payload, &out_len);
            CHECK(out_len == len && !memcmp(out, bytes, len), "%s: re-encode differs", name);
            free(out);
        }
        hb_buf_free(&key);
        hb_buf_free(&payload);
        hb_buf_free(&want_key);
        hb_buf_free(&want_payload);
        free(bytes);
        n++;
    }
    printf("record vectors: %d\n", n);
}

static void encode_like(hb_json *j, const cJSON *msg) {
    const cJSON *m = msg->child;
    hb_json_begin(j, m->valuestring);
    for (m = m->next; m; m = m->next) {
        if (cJSON_IsString(m)) hb_json_str(j, m->string, m->valuestring);
        else if (cJSON_IsBool(m)) hb_json_bool(j, m->string, cJSON_IsTrue(m));
        else if (cJSON_IsNumber(m)) hb_json_u64(j, m->string, (uint64_t)m->valuedouble);
        else if (cJSON_IsArray(m)) {
            const char *v[64];
            size_t n = 0;
            for (const cJSON *a = m->child; a && n < 64; a = a->next) v[n++] = a->valuestring;
            hb_json_str_array(j, m->string, v, n);
        }
    }
    hb_json_end(j);
}

static void control_vectors(const cJSON *list) {
    const cJSON *v;
    int n = 0;
    cJSON_ArrayForEach(v, list) {
        const char *name = cJSON_GetObjectItem(v, "name")->valuestring;
        size_t len;
        uint8_t *bytes = slurp(cJSON_GetObjectItem(v, "file")->valuestring, &len);
        hb_header h;
        hb_buf key = {0}, payload = {0};
        CHECK(last_message(bytes, len, &h, &key, &payload) == 1, "%s: not one message", name);
        cJSON *got = cJSON_ParseWithLength((const char *)payload.p, payload.len);
        const cJSON *want = cJSON_GetObjectItem(v, "message");
        CHECK(h.kind == HB_KIND_BRIDGE_CONTROL && cJSON_Compare(got, want, 1), "%s: decode", name);
        hb_json j = {0};
        encode_like(&j, want);
        size_t out_len;
        hb_buf empty = {0};
        uint8_t *out = sdk_frames((uint32_t)cJSON_GetObjectItem(v, "edge")->valuedouble, 1u << 20,
                                  HB_KIND_BRIDGE_CONTROL, HB_JSON, 0, 0, &empty, &j.b, &out_len);
        CHECK(out_len == len && !memcmp(out, bytes, len), "%s: re-encode differs", name);
        free(out);
        hb_buf_free(&j.b);
        hb_buf_free(&key);
        hb_buf_free(&payload);
        cJSON_Delete(got);
        free(bytes);
        n++;
    }
    printf("control vectors: %d\n", n);
}

static void session_vectors(const cJSON *list, const char *token, const char *language) {
    const cJSON *v;
    int n = 0;
    cJSON_ArrayForEach(v, list) {
        const char *name = cJSON_GetObjectItem(v, "name")->valuestring;
        size_t in_len, want_len;
        uint8_t *in = slurp(cJSON_GetObjectItem(v, "to_filter")->valuestring, &in_len);
        uint8_t *want = slurp(cJSON_GetObjectItem(v, "from_filter")->valuestring, &want_len);
        FILE *fin = tmpfile(), *fout = tmpfile();
        fwrite(in, 1, in_len, fin);
        fflush(fin);
        rewind(fin);
        hb_filter f = hb_reference_filter();
        int status = hb_run_fds(fileno(fin), fileno(fout), token, language, &f);
        long got_len = lseek(fileno(fout), 0, SEEK_CUR);
        uint8_t *got = malloc((size_t)got_len + 1);
        lseek(fileno(fout), 0, SEEK_SET);
        CHECK(read(fileno(fout), got, (size_t)got_len) == got_len, "%s: read back", name);
        int expect_status = (int)cJSON_GetObjectItem(v, "exit_status")->valuedouble;
        CHECK(status == expect_status, "%s: status %d, expected %d", name, status, expect_status);
        if (cJSON_IsTrue(cJSON_GetObjectItem(v, "invalid"))) {
            CHECK((size_t)got_len > want_len && !memcmp(got, want, want_len), "%s: prefix", name);
            hb_header h;
            hb_buf key = {0}, payload = {0};
            int ok = last_message(got + want_len, (size_t)got_len - want_len, &h, &key, &payload);
            cJSON *err = ok > 0 ? cJSON_ParseWithLength((const char *)payload.p, payload.len) : NULL;
            const char *code = cJSON_GetStringValue(cJSON_GetObjectItem(err, "code"));
            const char *want_code = cJSON_GetObjectItem(v, "error_code")->valuestring;
            CHECK(code && !strcmp(code, want_code), "%s: error code %s, expected %s", name,
                  code ? code : "(none)", want_code);
            cJSON_Delete(err);
            hb_buf_free(&key);
            hb_buf_free(&payload);
        } else {
            CHECK((size_t)got_len == want_len && !memcmp(got, want, want_len),
                  "%s: %ld bytes written, %zu expected, or they differ", name, got_len, want_len);
        }
        fclose(fin);
        fclose(fout);
        free(in);
        free(want);
        free(got);
        n++;
    }
    printf("sessions: %d\n", n);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s SPEC_BRIDGE_DIR\n", argv[0]);
        return 2;
    }
    DIR_ = argv[1];
    size_t len;
    char *text = (char *)slurp("index.json", &len);
    cJSON *index = cJSON_ParseWithLength(text, len);
    if (!index) return 1;
    control_vectors(cJSON_GetObjectItem(index, "control"));
    record_vectors(cJSON_GetObjectItem(index, "records"));
    session_vectors(cJSON_GetObjectItem(index, "sessions"),
                    cJSON_GetObjectItem(index, "token")->valuestring,
                    cJSON_GetObjectItem(index, "language")->valuestring);
    cJSON_Delete(index);
    free(text);
    if (failures) fprintf(stderr, "%d failures\n", failures);
    else printf("all bridge vectors pass\n");
    return failures ? 1 : 0;
}
