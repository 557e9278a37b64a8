/* Frame headers of the Heddle wire format (spec/wire.md §3, §7). */
#include <string.h>

#include "internal.h"

static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static void put32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static uint32_t get32(const uint8_t *p) {
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}
static uint64_t get64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

void hb_header_encode(const hb_header *h, uint8_t out[HB_HEADER_LEN]) {
    memset(out, 0, HB_HEADER_LEN);
    put16(out, HB_MAGIC);
    out[2] = HB_WIRE_VERSION;
    out[3] = h->kind;
    out[4] = h->flags;
    out[5] = h->codec;
    put16(out + 6, h->key_len);
    put32(out + 8, h->edge);
    put32(out + 12, h->tag);
    put64(out + 24, h->seq);
    put64(out + 32, h->msg_len);
    put32(out + 40, h->frag_len);
}

static bool codec_known(uint8_t c) { return c <= 0x05 || (c >= 0x10 && c <= 0x19); }

static const uint8_t ELEMENT[10] = {1, 1, 2, 2, 4, 4, 8, 8, 4, 8};

const char *hb_header_decode(const uint8_t in[HB_HEADER_LEN], hb_header *h) {
    if (get16(in) != HB_MAGIC) return "not a Heddle frame (bad magic)";
    if (in[2] != HB_WIRE_VERSION) return "unsupported wire version";
    h->kind = in[3];
    h->flags = in[4];
    h->codec = in[5];
    h->key_len = get16(in + 6);
    h->edge = get32(in + 8);
    h->tag = get32(in + 12);
    h->seq = get64(in + 24);
    h->msg_len = get64(in + 32);
    h->frag_len = get32(in + 40);
    if (h->kind < 1 || h->kind > 9) return "unknown frame kind";
    if (h->flags & 0xFC) return "reserved flag bits set";
    if (!codec_known(h->codec)) return "unknown codec";
    if (get32(in + 44) != 0) return "reserved header word is not 0";
    if (h->frag_len > (16u << 20)) return "frag_len above the limit";
    if (h->msg_len > (1ull << 40)) return "msg_len above the limit";
    if (h->frag_len > h->msg_len) return "frag_len above msg_len";
    if (h->flags == (HB_FIRST | HB_LAST) && h->frag_len != h->msg_len)
        return "a whole frame whose frag_len differs from msg_len";
    if (h->key_len && !(h->flags & HB_FIRST)) return "a key on a fragment that is not the first";
    if (h->codec >= 0x10 && h->msg_len % ELEMENT[h->codec - 0x10])
        return "an array whose length is not a multiple of its element";
    return NULL;
}
