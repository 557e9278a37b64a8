/* The session's course (spec/bridge.md §4.1): INITIALIZE both ways, init, the loop over
 * DATA and control messages, CHANGE_BRIDGE_TYPE, COMPLETE; and hb_run, which takes over the
 * process's standard streams for the pipe transport. */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "internal.h"

static uint64_t json_u64(const cJSON *o, const char *k, uint64_t dflt) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) && v->valuedouble >= 0 ? (uint64_t)v->valuedouble : dflt;
}

static const char *json_str(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : "";
}

static cJSON *parse_control(hb_session *s, const msg *m) {
    cJSON *o = cJSON_ParseWithLength((const char *)m->data, m->len);
    if (!cJSON_IsObject(o) || !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(o, "type"))) {
        cJSON_Delete(o);
        hb_set_error(s, "PROTOCOL", -1, "a control message that is not a JSON object with a type");
        return NULL;
    }
    return o;
}

static int send_status(hb_session *s) {
    uint64_t fds = 0, rss = 0;
    DIR *d = opendir("/proc/self/fd");
    if (d) {
        while (readdir(d)) fds++;
        closedir(d);
        fds = fds > 3 ? fds - 3 : 0; /* ".", ".." and the directory's own descriptor */
    }
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        unsigned long size = 0, res = 0;
        if (fscanf(f, "%lu %lu", &size, &res) == 2) rss = (uint64_t)res * (uint64_t)sysconf(_SC_PAGESIZE);
        fclose(f);
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    uint64_t cpu = (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000u +
                   (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
    hb_json_begin(&s->json, "STATUS");
    hb_json_u64(&s->json, "records_in", s->next_in);
    hb_json_u64(&s->json, "records_out", s->next_out);
    hb_json_u64(&s->json, "bytes_in", s->bytes_in);
    hb_json_u64(&s->json, "bytes_out", s->bytes_out);
    hb_json_u64(&s->json, "open_fds", fds);
    hb_json_u64(&s->json, "rss_bytes", rss);
    hb_json_u64(&s->json, "cpu_us", cpu);
    return hb_send_json(s);
}

/* §6: the last frame on the old channel, then the token first on the new one. */
static int switch_channel(hb_session *s, const cJSON *o) {
    uint64_t epoch = json_u64(o, "epoch", 0);
    if (s->pending.head) return hb_set_error(s, "PROTOCOL", -1, "frames after CHANGE_BRIDGE_TYPE");
    if (!s->can_switch) return hb_set_error(s, "PROTOCOL", -1, "this session cannot switch transports");
    hb_json_begin(&s->json, "CHANGE_BRIDGE_TYPE");
    hb_json_u64(&s->json, "epoch", epoch);
    if (hb_send_json(s) || hb_channel_flush(&s->ch)) return -1;
    hb_channel_close(&s->ch);
    char spec[4200], err[512];
    const char *t = json_str(o, "transport");
    if (!strcmp(t, "pipe")) snprintf(spec, sizeof spec, "pipe");
    else snprintf(spec, sizeof spec, "%s:%s", t, json_str(o, "address"));
    if (hb_channel_open(&s->ch, spec, s->pipe_r, s->pipe_w, err, sizeof err))
        return hb_set_error(s, "PROTOCOL", -1, "%s", err);
    hb_json_begin(&s->json, "CHANGE_BRIDGE_TYPE");
    hb_json_u64(&s->json, "epoch", epoch);
    hb_json_str(&s->json, "token", s->token);
    return hb_send_json(s);
}

static int grant(hb_session *s) {
    uint8_t hb[HB_HEADER_LEN], n[4];
    hb_header h = {.kind = HB_KIND_CREDIT, .flags = HB_FIRST | HB_LAST, .edge = s->edge,
                   .msg_len = 4, .frag_len = 4};
    hb_header_encode(&h, hb);
    for (int i = 0; i < 4; i++) n[i] = (uint8_t)(s->grant >> (8 * i));
    if (hb_channel_write(&s->ch, hb, sizeof hb) || hb_channel_write(&s->ch, n, 4))
        return hb_set_error(s, "PROTOCOL", -1, "writing to the channel failed");
    return 0;
}

/* Handles one control message: 1 = session over with status *status, 0 = go on, -1. */
static int control(hb_session *s, const hb_filter *f, const msg *m, int *status) {
    cJSON *o = parse_control(s, m);
    if (!o) return -1;
    const char *type = json_str(o, "type");
    int rc = 0;
    if (!strcmp(type, "PAUSE_RESUME")) {
        s->paused = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "paused"));
        hb_json_begin(&s->json, "PAUSE_RESUME");
        hb_json_bool(&s->json, "paused", s->paused);
        rc = hb_send_json(s);
    } else if (!strcmp(type, "STATUS")) {
        rc = send_status(s);
    } else if (!strcmp(type, "COMPLETE")) {
        s->credits = UINT64_MAX / 2; /* F3: finalize needs no credit */
        if (s->paused) rc = hb_set_error(s, "PROTOCOL", -1, "COMPLETE while paused");
        else if (f->finalize && f->finalize(f->user, s)) {
            char why[sizeof s->err];
            snprintf(why, sizeof why, "%s", s->err[0] ? s->err : "finalize failed");
            rc = hb_set_error(s, "FINALIZE", -1, "%s", why);
        } else if (!s->code[0]) {
            hb_json_begin(&s->json, "COMPLETE");
            hb_json_u64(&s->json, "records_in", s->next_in);
            hb_json_u64(&s->json, "records_out", s->next_out);
            rc = hb_send_json(s);
            *status = HB_EXIT_OK;
            if (!rc) rc = 1;
        } else {
            rc = -1;
        }
    } else if (!strcmp(type, "ABORT")) {
        fprintf(stderr, "heddle bridge: aborted by the host: %s\n", json_str(o, "reason"));
        *status = HB_EXIT_ABORT;
        rc = 1;
    } else if (!strcmp(type, "ERROR")) {
        fprintf(stderr, "heddle bridge: the host failed: %s\n", json_str(o, "message"));
        *status = HB_EXIT_ERROR;
        rc = 1;
    } else if (!strcmp(type, "CHANGE_BRIDGE_TYPE")) {
        rc = switch_channel(s, o);
    } else {
        rc = hb_set_error(s, "PROTOCOL", -1, "unknown control message '%s'", type);
    }
    cJSON_Delete(o);
    return rc;
}

static int loop(hb_session *s, const hb_filter *f) {
    int status = HB_EXIT_ERROR;
    for (;;) {
        msg *m = NULL;
        if (s->deferred.head && !s->paused) m = hb_pop(&s->deferred);
        else if (s->pending.head) m = hb_pop(&s->pending);
        else {
            int r = hb_read_wire(s, &m);
            if (r < 0) return -1;
            if (r == 0) return hb_set_error(s, "PROTOCOL", -1, "the host closed the channel before COMPLETE");
        }
        int rc = 0;
        if (m->kind == HB_KIND_DATA) {
            if (s->paused) {
                hb_push(&s->deferred, m);
                continue;
            }
            s->next_in++;
            s->bytes_in += m->len;
            hb_record rec = {m->codec, m->seq, m->key, m->key_len, m->data, m->len};
            s->err[0] = 0;
            if (f->process) rc = f->process(f->user, &rec, s);
            else rc = hb_emit(s, m->codec, m->data, m->len, m->key, m->key_len);
            if (rc && !s->code[0]) {
                char why[sizeof s->err];
                snprintf(why, sizeof why, "%s", s->err[0] ? s->err : "process failed");
                hb_set_error(s, "PROCESS", (int64_t)m->seq, "%s", why);
            }
            if (rc) rc = -1;
            else if (s->next_in % s->grant == 0) rc = grant(s);
        } else if (m->kind == HB_KIND_CREDIT) {
            rc = hb_add_credit(s, m);
        } else {
            rc = control(s, f, m, &status);
        }
        hb_msg_free(m);
        if (rc < 0) return -1;
        if (rc == 1) return status;
    }
}

static int session(hb_session *s, const hb_filter *f) {
    hb_json_begin(&s->json, "INITIALIZE");
    hb_json_u64(&s->json, "version", s->version);
    hb_json_str(&s->json, "token", s->token);
    hb_json_str(&s->json, "language", s->language);
    if (hb_send_json(s)) return -1;
    msg *m = NULL;
    int r = hb_read_wire(s, &m);
    if (r <= 0) return r ? -1 : hb_set_error(s, "PROTOCOL", -1, "the host did not answer INITIALIZE");
    cJSON *o = m->kind == HB_KIND_BRIDGE_CONTROL ? parse_control(s, m) : NULL;
    hb_msg_free(m);
    if (!o) return hb_set_error(s, "PROTOCOL", -1, "the host's first message is not INITIALIZE");
    int rc = 0;
    uint64_t v = json_u64(o, "version", 0);
    if (!strcmp(json_str(o, "type"), "ERROR")) {
        /* The host refused this filter (another version, a wrong token): nothing to answer. */
        fprintf(stderr, "heddle bridge: the host refused this filter: %s\n", json_str(o, "message"));
        cJSON_Delete(o);
        return -2;
    } else if (strcmp(json_str(o, "type"), "INITIALIZE")) {
        rc = hb_set_error(s, "PROTOCOL", -1, "expected INITIALIZE, got %s", json_str(o, "type"));
    } else if (v != s->version) {
        rc = hb_set_error(s, "VERSION", -1, "host speaks bridge protocol version %" PRIu64 ", this filter version %u", v, s->version);
    } else {
        s->edge = (uint32_t)json_u64(o, "bridge", 0);
        s->frame_payload = (uint32_t)json_u64(o, "frame_payload", 1u << 20);
        if (!s->frame_payload) s->frame_payload = 1;
        s->max_record = json_u64(o, "max_record", 64u << 20);
        s->credits = json_u64(o, "credits", 1);
        s->grant = s->credits / 2 ? (uint32_t)(s->credits / 2) : 1;
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(o, "args");
        int argc = cJSON_GetArraySize(args);
        const char **argv = calloc((size_t)argc + 1, sizeof *argv);
        for (int i = 0; i < argc && argv; i++) {
            const cJSON *a = cJSON_GetArrayItem(args, i);
            argv[i] = cJSON_IsString(a) ? a->valuestring : "";
        }
        hb_context ctx = {json_str(o, "task"), (uint32_t)json_u64(o, "instance", 0),
                          (uint32_t)json_u64(o, "parallelism", 1)};
        s->err[0] = 0;
        if (!argv) rc = hb_set_error(s, "INIT", -1, "out of memory");
        else if (f->init && f->init(f->user, argc, argv, &ctx, s)) {
            char why[sizeof s->err];
            snprintf(why, sizeof why, "%s", s->err[0] ? s->err : "init failed");
            rc = hb_set_error(s, "INIT", -1, "%s", why);
        }
        free(argv);
    }
    cJSON_Delete(o);
    if (rc) return -1;
    hb_json_begin(&s->json, "START_STOP");
    hb_json_str(&s->json, "state", "started");
    if (hb_send_json(s)) return -1;
    return loop(s, f);
}

static int run(hb_session *s, const hb_filter *f) {
    const char *v = getenv("HEDDLE_BRIDGE_TEST_VERSION"); /* tests of version refusal */
    s->version = v ? (uint32_t)strtoul(v, NULL, 10) : HB_PROTOCOL_VERSION;
    s->frame_payload = 1u << 20;
    s->max_record = 64u << 20;
    s->err_record = -1;
    int status = session(s, f);
    if (status == -2) {
        status = HB_EXIT_ERROR;
    } else if (status < 0) {
        hb_json_begin(&s->json, "ERROR");
        hb_json_str(&s->json, "code", s->code[0] ? s->code : "PROTOCOL");
        hb_json_str(&s->json, "message", s->err);
        if (s->err_record >= 0) hb_json_u64(&s->json, "record", (uint64_t)s->err_record);
        s->code[0] = 0; /* let the ERROR itself be written */
        hb_send_json(s);
        fprintf(stderr, "heddle bridge: %s\n", s->err);
        status = HB_EXIT_ERROR;
    }
    hb_channel_flush(&s->ch);
    for (msg *m; (m = hb_pop(&s->pending)) || (m = hb_pop(&s->deferred));) hb_msg_free(m);
    hb_buf_free(&s->json.b);
    return status;
}

int hb_run_fds(int read_fd, int write_fd, const char *token, const char *language,
               const hb_filter *filter) {
    hb_session s = {0};
    s.ch.rfd = read_fd;
    s.ch.wfd = write_fd;
    s.token = token;
    s.language = language;
    int status = run(&s, filter);
    hb_buf_free(&s.ch.in);
    hb_buf_free(&s.ch.out);
    return status;
}

int hb_run(const hb_filter *filter) {
    const char *spec = getenv("HEDDLE_BRIDGE"), *token = getenv("HEDDLE_BRIDGE_TOKEN");
    if (!spec || !token) {
        fprintf(stderr, "heddle bridge: HEDDLE_BRIDGE and HEDDLE_BRIDGE_TOKEN are not set; this "
                        "program is a bridged filter and must be started by Heddle\n");
        return HB_EXIT_ERROR;
    }
    hb_session s = {0};
    s.token = token;
    s.language = "c";
    signal(SIGPIPE, SIG_IGN); /* a closed channel is an error to report, not a death */
    s.can_switch = true;
    /* §3: the protocol owns the standard streams; the author's output goes to stderr. */
    fflush(stdout);
    s.pipe_r = fcntl(0, F_DUPFD_CLOEXEC, 3);
    s.pipe_w = fcntl(1, F_DUPFD_CLOEXEC, 3);
    int null = open("/dev/null", O_RDONLY);
    if (s.pipe_r < 0 || s.pipe_w < 0 || null < 0 || dup2(2, 1) < 0 || dup2(null, 0) < 0) {
        perror("heddle bridge: taking over the standard streams");
        return HB_EXIT_ERROR;
    }
    close(null);
    char err[512];
    if (hb_channel_open(&s.ch, spec, s.pipe_r, s.pipe_w, err, sizeof err)) {
        fprintf(stderr, "heddle bridge: cannot open the channel %s: %s\n", spec, err);
        return HB_EXIT_ERROR;
    }
    int status = run(&s, filter);
    hb_channel_close(&s.ch);
    return status;
}
