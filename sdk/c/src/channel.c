/* The filter's side of a channel (spec/bridge.md §3): buffered frames over two
 * descriptors, and the four transports. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "internal.h"

#define READ_CHUNK (256u << 10)

int hb_channel_flush(hb_channel *c) {
    size_t at = 0;
    while (at < c->out.len) {
        ssize_t n = write(c->wfd, c->out.p + at, c->out.len - at);
        if (n < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        at += (size_t)n;
    }
    c->out.len = 0;
    return 0;
}

int hb_channel_write(hb_channel *c, const void *data, size_t n) {
    if (n >= READ_CHUNK) {
        /* Large payloads go straight to the descriptor after what is buffered. */
        if (hb_channel_flush(c)) return -1;
        const uint8_t *p = data;
        while (n) {
            ssize_t w = write(c->wfd, p, n);
            if (w < 0) {
                if (errno == EINTR) continue;
                return -1;
            }
            p += w;
            n -= (size_t)w;
        }
        return 0;
    }
    if (hb_buf_put(&c->out, data, n)) return -1;
    return c->out.len >= READ_CHUNK ? hb_channel_flush(c) : 0;
}

int hb_channel_read(hb_channel *c, void *dst, size_t n) {
    uint8_t *out = dst;
    size_t got = 0;
    while (got < n) {
        size_t avail = c->in.len - c->in_pos;
        if (avail) {
            size_t take = avail < n - got ? avail : n - got;
            memcpy(out + got, c->in.p + c->in_pos, take);
            c->in_pos += take;
            got += take;
            continue;
        }
        if (hb_channel_flush(c)) return -1;
        if (n - got >= READ_CHUNK) {
            ssize_t r = read(c->rfd, out + got, n - got);
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) return (r == 0 && got == 0) ? 0 : -1;
            got += (size_t)r;
            continue;
        }
        c->in_pos = 0;
        c->in.len = 0;
        if (c->in.cap < READ_CHUNK) {
            uint8_t *p = realloc(c->in.p, READ_CHUNK);
            if (!p) return -1;
            c->in.p = p;
            c->in.cap = READ_CHUNK;
        }
        ssize_t r = read(c->rfd, c->in.p, c->in.cap);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return (r == 0 && got == 0) ? 0 : -1;
        c->in.len = (size_t)r;
    }
    return 1;
}

void hb_channel_close(hb_channel *c) {
    hb_channel_flush(c);
    if (c->owned) {
        close(c->rfd);
        if (c->wfd != c->rfd) close(c->wfd);
    }
    hb_buf_free(&c->in);
    hb_buf_free(&c->out);
    c->in_pos = 0;
}

static int fail(char *err, size_t errlen, const char *what, const char *where) {
    snprintf(err, errlen, "%s %s: %s", what, where, strerror(errno));
    return -1;
}

int hb_channel_open(hb_channel *c, const char *spec, int pipe_r, int pipe_w, char *err,
                    size_t errlen) {
    memset(c, 0, sizeof *c);
    const char *colon = strchr(spec, ':');
    const char *addr = colon ? colon + 1 : "";
    size_t tlen = colon ? (size_t)(colon - spec) : strlen(spec);
    if (tlen == 4 && !strncmp(spec, "pipe", 4)) {
        c->rfd = pipe_r;
        c->wfd = pipe_w;
        c->owned = false;
        return 0;
    }
    if (tlen == 4 && !strncmp(spec, "fifo", 4)) {
        char path[4096];
        snprintf(path, sizeof path, "%s/to-filter", addr);
        c->rfd = open(path, O_RDONLY | O_CLOEXEC);
        if (c->rfd < 0) return fail(err, errlen, "opening", path);
        snprintf(path, sizeof path, "%s/from-filter", addr);
        c->wfd = open(path, O_WRONLY | O_CLOEXEC);
        if (c->wfd < 0) return fail(err, errlen, "opening", path);
        c->owned = true;
        return 0;
    }
    int fd = -1;
    if (tlen == 3 && !strncmp(spec, "tcp", 3)) {
        char host[256];
        const char *port = strrchr(addr, ':');
        if (!port || (size_t)(port - addr) >= sizeof host) {
            snprintf(err, errlen, "a bad TCP address %s", addr);
            return -1;
        }
        memcpy(host, addr, (size_t)(port - addr));
        host[port - addr] = 0;
        struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res;
        int rc = getaddrinfo(host, port + 1, &hints, &res);
        if (rc) {
            snprintf(err, errlen, "resolving %s: %s", addr, gai_strerror(rc));
            return -1;
        }
        for (struct addrinfo *a = res; a && fd < 0; a = a->ai_next) {
            fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
            if (fd >= 0 && connect(fd, a->ai_addr, a->ai_addrlen)) {
                close(fd);
                fd = -1;
            }
        }
        freeaddrinfo(res);
        if (fd < 0) return fail(err, errlen, "connecting to", addr);
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    } else if (tlen == 4 && !strncmp(spec, "unix", 4)) {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        if (strlen(addr) >= sizeof sa.sun_path) {
            snprintf(err, errlen, "a socket path too long: %s", addr);
            return -1;
        }
        strcpy(sa.sun_path, addr);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa)) {
            if (fd >= 0) close(fd);
            return fail(err, errlen, "connecting to", addr);
        }
    } else {
        snprintf(err, errlen, "unknown bridge transport '%s'", spec);
        return -1;
    }
    c->rfd = c->wfd = fd;
    c->owned = true;
    return 0;
}
