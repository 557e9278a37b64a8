/* Messages on the filter's channel: reading whole messages with the checks of spec/bridge.md
 * §2 (B2, B3, B5), writing fragmented ones (B3), credits and hb_emit (§5). */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

void hb_push(queue *q, msg *m) {
    m->next = NULL;
    if (q->tail) q->tail->next = m; else q->head = m;
    q->tail = m;
}

msg *hb_pop(queue *q) {
    msg *m = q->head;
    if (m) {
        q->head = m->next;
        if (!q->head) q->tail = NULL;
    }
    return m;
}

void hb_msg_free(msg *m) {
    if (!m) return;
    free(m->key);
    free(m->data);
    free(m);
}

int hb_set_error(hb_session *s, const char *code, int64_t record, const char *fmt, ...) {
    if (s->code[0]) return -1; /* keep the first error */
    snprintf(s->code, sizeof s->code, "%s", code);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->err, sizeof s->err, fmt, ap);
    va_end(ap);
    s->err_record = record;
    return -1;
}

void hb_fail(hb_session *s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->err, sizeof s->err, fmt, ap);
    va_end(ap);
}

const char *hb_error(const hb_session *s) { return s->err; }

int hb_write_message(hb_session *s, uint8_t kind, uint8_t codec, uint32_t tag, uint64_t seq,
                         const void *key, size_t key_len, const void *data, size_t len) {
    size_t fp = s->frame_payload ? s->frame_payload : 1;
    size_t at = 0;
    do {
        size_t chunk = len - at < fp ? len - at : fp;
        hb_header h = {.kind = kind, .codec = codec, .edge = s->edge, .tag = tag, .seq = seq,
                       .msg_len = len, .frag_len = (uint32_t)chunk};
        h.flags = (uint8_t)((at == 0 ? HB_FIRST : 0) | (at + chunk >= len ? HB_LAST : 0));
        h.key_len = at == 0 ? (uint16_t)key_len : 0;
        uint8_t hb[HB_HEADER_LEN];
        hb_header_encode(&h, hb);
        if (hb_channel_write(&s->ch, hb, sizeof hb) ||
            (h.key_len && hb_channel_write(&s->ch, key, key_len)) ||
            (chunk && hb_channel_write(&s->ch, (const uint8_t *)data + at, chunk)))
            return hb_set_error(s, "PROTOCOL", -1, "writing to the channel failed");
        at += chunk;
    } while (at < len);
    return 0;
}

int hb_send_json(hb_session *s) {
    if (hb_json_end(&s->json)) return hb_set_error(s, "PROTOCOL", -1, "out of memory");
    return hb_write_message(s, HB_KIND_BRIDGE_CONTROL, HB_JSON, 0, 0, NULL, 0, s->json.b.p,
                         s->json.b.len);
}

/* Reads one whole message from the wire: 1 ok, 0 end of stream, -1 error. */
int hb_read_wire(hb_session *s, msg **out) {
    uint8_t hb[HB_HEADER_LEN];
    hb_header h;
    int r = hb_channel_read(&s->ch, hb, sizeof hb);
    if (r <= 0) return r ? hb_set_error(s, "PROTOCOL", -1, "the host closed the channel inside a frame") : 0;
    const char *bad = hb_header_decode(hb, &h);
    if (bad) return hb_set_error(s, "PROTOCOL", -1, "%s", bad);
    if (!(h.flags & HB_FIRST)) return hb_set_error(s, "PROTOCOL", -1, "a message without a FIRST frame");
    if (h.kind != HB_KIND_DATA && h.kind != HB_KIND_CREDIT && h.kind != HB_KIND_BRIDGE_CONTROL)
        return hb_set_error(s, "PROTOCOL", -1, "a frame of kind %u on a bridge", h.kind);
    if (h.kind == HB_KIND_DATA) {
        if (h.tag != HB_TAG_DATA) return hb_set_error(s, "PROTOCOL", -1, "a record with tag %u", h.tag);
        if (h.codec == HB_PICKLE)
            return hb_set_error(s, "PROTOCOL", (int64_t)h.seq, "record %" PRIu64 " is a pickle (B5)", h.seq);
        if (h.seq != s->seen_in)
            return hb_set_error(s, "PROTOCOL", (int64_t)h.seq,
                             "record %" PRIu64 " arrived where record %" PRIu64 " was due (B2)",
                             h.seq, s->seen_in);
        s->seen_in++;
    }
    if (h.msg_len > s->max_record)
        return hb_set_error(s, "RECORD_TOO_LARGE", (int64_t)h.seq,
                         "record %" PRIu64 " is %" PRIu64 " bytes, above max_record %" PRIu64,
                         h.seq, h.msg_len, s->max_record);
    msg *m = calloc(1, sizeof *m);
    if (!m) return hb_set_error(s, "PROTOCOL", -1, "out of memory");
    m->kind = h.kind;
    m->codec = h.codec;
    m->seq = h.seq;
    m->key_len = h.key_len;
    m->len = (size_t)h.msg_len;
    m->key = malloc(m->key_len + 1);
    m->data = malloc(m->len + 1);
    if (!m->key || !m->data) {
        hb_msg_free(m);
        return hb_set_error(s, "PROTOCOL", -1, "out of memory for a %zu-byte record", (size_t)h.msg_len);
    }
    size_t at = 0;
    if (hb_channel_read(&s->ch, m->key, m->key_len) < 0 && m->key_len) goto cut;
    for (;;) {
        if (at + h.frag_len > m->len) goto bad_frag;
        if (h.frag_len && hb_channel_read(&s->ch, m->data + at, h.frag_len) != 1) goto cut;
        at += h.frag_len;
        if (h.flags & HB_LAST) break;
        hb_header n;
        if (hb_channel_read(&s->ch, hb, sizeof hb) != 1) goto cut;
        if ((bad = hb_header_decode(hb, &n))) {
            hb_msg_free(m);
            return hb_set_error(s, "PROTOCOL", -1, "%s", bad);
        }
        if ((n.flags & HB_FIRST) || n.kind != h.kind || n.seq != h.seq || n.msg_len != h.msg_len ||
            n.key_len)
            goto bad_frag;
        h.flags = n.flags;
        h.frag_len = n.frag_len;
    }
    if (at != m->len) goto bad_frag;
    *out = m;
    return 1;
cut:
    hb_msg_free(m);
    return hb_set_error(s, "PROTOCOL", -1, "the host closed the channel inside a message");
bad_frag:
    hb_msg_free(m);
    return hb_set_error(s, "PROTOCOL", -1, "a fragment that does not continue its message");
}

int hb_add_credit(hb_session *s, const msg *m) {
    if (m->len != 4) return hb_set_error(s, "PROTOCOL", -1, "a credit of %zu bytes", m->len);
    s->credits += (uint32_t)(m->data[0] | m->data[1] << 8 | m->data[2] << 16 | (uint32_t)m->data[3] << 24);
    return 0;
}

/* Whether a control message is the host's COMPLETE (F3). */
static bool is_complete(const msg *m) {
    cJSON *o = cJSON_ParseWithLength((const char *)m->data, m->len);
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "type");
    bool yes = cJSON_IsString(t) && !strcmp(t->valuestring, "COMPLETE");
    cJSON_Delete(o);
    return yes;
}

int hb_emit(hb_session *s, uint8_t codec, const void *data, size_t len, const void *key,
            size_t key_len) {
    if (codec == HB_PICKLE) return hb_set_error(s, "PROTOCOL", -1, "pickled records cannot cross a bridge");
    if (len > s->max_record)
        return hb_set_error(s, "RECORD_TOO_LARGE", -1,
                         "result %" PRIu64 " is %zu bytes, above max_record %" PRIu64,
                         s->next_out, len, s->max_record);
    if (key_len > 65535) return hb_set_error(s, "PROTOCOL", -1, "a key of %zu bytes", key_len);
    while (s->credits == 0) { /* F2: read ahead until a credit arrives */
        msg *m = NULL;
        int r = hb_read_wire(s, &m);
        if (r <= 0) return r ? -1 : hb_set_error(s, "PROTOCOL", -1, "the host closed the channel while waiting for credit");
        if (m->kind == HB_KIND_CREDIT) {
            int bad = hb_add_credit(s, m);
            hb_msg_free(m);
            if (bad) return -1;
        } else {
            if (m->kind == HB_KIND_BRIDGE_CONTROL && is_complete(m))
                s->credits = UINT64_MAX / 2; /* F3: the host sends no more credit */
            hb_push(&s->pending, m);
        }
    }
    s->credits--;
    if (hb_write_message(s, HB_KIND_DATA, codec, HB_TAG_RESULTS, s->next_out, key, key_len, data, len))
        return -1;
    s->next_out++;
    s->bytes_out += len;
    return 0;
}

