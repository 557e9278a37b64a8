/* Internals of the C bridge SDK: frames, channels and the canonical JSON writer. */
#ifndef HB_INTERNAL_H
#define HB_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "heddle_bridge.h"

#define HB_HEADER_LEN 48
#define HB_MAGIC 0x4448u
#define HB_WIRE_VERSION 1u
#define HB_KIND_DATA 1u
#define HB_KIND_CREDIT 4u
#define HB_KIND_BRIDGE_CONTROL 7u
#define HB_FIRST 1u
#define HB_LAST 2u
#define HB_TAG_DATA 0u
#define HB_TAG_RESULTS 1u
#define HB_PICKLE 0x04u

typedef struct hb_header {
    uint8_t kind, flags, codec;
    uint16_t key_len;
    uint32_t edge, tag;
    uint64_t seq, msg_len;
    uint32_t frag_len;
} hb_header;

/* Header bytes <-> fields; hb_header_check applies wire rules V2-V13 and returns NULL or
 * the reason the header is refused. */
void hb_header_encode(const hb_header *h, uint8_t out[HB_HEADER_LEN]);
const char *hb_header_decode(const uint8_t in[HB_HEADER_LEN], hb_header *h);

/* A growable byte buffer. */
typedef struct hb_buf {
    uint8_t *p;
    size_t len, cap;
} hb_buf;
int hb_buf_put(hb_buf *b, const void *data, size_t n);
void hb_buf_free(hb_buf *b);

/* One channel: a read buffer and a write buffer over two descriptors. */
typedef struct hb_channel {
    int rfd, wfd;
    bool owned;
    /* The shared-memory transport (spec/bridge.md §3.1): the mapping, or NULL. */
    uint8_t *shm;
    size_t shm_len;
    uint64_t cap;
    size_t rx, tx;
    int peer; /* pidfd of the host, or -1 */
    hb_buf in;
    size_t in_pos;
    hb_buf out;
} hb_channel;

int hb_channel_flush(hb_channel *c);
/* Reads exactly n bytes (flushing first when it must wait); 1 = ok, 0 = clean end of
 * stream before any byte, -1 = error or end inside. */
int hb_channel_read(hb_channel *c, void *dst, size_t n);
int hb_channel_write(hb_channel *c, const void *data, size_t n);
void hb_channel_close(hb_channel *c);
/* Opens `spec` (pipe, fifo:DIR, tcp:HOST:PORT, unix:PATH); pipe uses the saved fds. */
int hb_channel_open(hb_channel *c, const char *spec, int pipe_r, int pipe_w, char *err,
                    size_t errlen);

/* Canonical JSON (spec/bridge.md B4), written member by member. */
typedef struct hb_json {
    hb_buf b;
    bool first;
} hb_json;
void hb_json_begin(hb_json *j, const char *type);
void hb_json_str(hb_json *j, const char *key, const char *value);
void hb_json_u64(hb_json *j, const char *key, uint64_t value);
void hb_json_bool(hb_json *j, const char *key, bool value);
void hb_json_str_array(hb_json *j, const char *key, const char *const *values, size_t n);
int hb_json_end(hb_json *j);

typedef struct msg {
    struct msg *next;
    uint8_t kind, codec;
    uint64_t seq;
    uint8_t *key, *data;
    size_t key_len, len;
} msg;

typedef struct queue {
    msg *head, *tail;
} queue;

struct hb_session {
    hb_channel ch;
    const char *token, *language;
    int pipe_r, pipe_w;
    bool can_switch, paused;
    uint32_t version, edge, frame_payload, grant;
    uint64_t max_record, credits, next_in, seen_in, next_out, bytes_in, bytes_out;
    queue pending, deferred;
    hb_json json;
    char code[24];
    char err[2048];
    int64_t err_record;
};

void hb_push(queue *q, msg *m);
msg *hb_pop(queue *q);
void hb_msg_free(msg *m);
int hb_set_error(hb_session *s, const char *code, int64_t record, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
int hb_write_message(hb_session *s, uint8_t kind, uint8_t codec, uint32_t tag, uint64_t seq,
                     const void *key, size_t key_len, const void *data, size_t len);
int hb_send_json(hb_session *s);
int hb_read_wire(hb_session *s, msg **out);
int hb_add_credit(hb_session *s, const msg *m);

#endif
