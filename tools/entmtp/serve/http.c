/* HTTP plumbing on libmicrohttpd: one thread per connection, so a generation
 * runs in its client's thread and a stream's reader callback can block on a
 * decoding step. A gate bounds the generations running at once; the next
 * `queue_max` wait for a slot and the rest are refused with 503. */
#include "serve.h"

#include "common/common.h"

#include <microhttpd.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <netdb.h>
#include <time.h>
#include <unistd.h>

struct serve_server {
    struct MHD_Daemon *daemon;
    const serve_model *sm;
    serve_gate *gate;
    atomic_ulong next_id;
};

/* ------------------------------------------------------------------ gate */

static int gate_enter(serve_gate *g) {
    pthread_mutex_lock(&g->mu);
    int ok = !g->draining && (g->active < g->parallel || g->waiting < g->queue_max);
    if (ok) {
        g->waiting++;
        while (g->active >= g->parallel && !g->draining) pthread_cond_wait(&g->cv, &g->mu);
        g->waiting--;
        ok = !g->draining;
        if (ok) g->active++;
    }
    pthread_mutex_unlock(&g->mu);
    return ok;
}

static void gate_leave(serve_gate *g) {
    pthread_mutex_lock(&g->mu);
    g->active--;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

/* ------------------------------------------------------------ the log */

/* One request: its body while it arrives, then what its log line says. */
typedef struct conn_state {
    char *data;
    size_t len, cap;
    int too_large;
    char method[8], url[64];
    double start;
    unsigned status;
    int streamed;       /* its line comes from sse_free, when the stream ends */
    char detail[200];   /* tokens and speed, or the error */
} conn_state;

/* "prompt 25, completion 40 tokens, 120.5 tokens/s, accept length 2.31" */
static void job_detail(const serve_job *j, char *out, size_t cap) {
    entmtp_session_stats st = { sizeof st };
    entmtp_session_get_stats(j->session, &st);
    snprintf(out, cap, "prompt %d, completion %d tokens, %.1f tokens/s, accept length %.2f%s", j->n_prompt, j->n_gen,
             st.tokens_per_second, st.mean_accept_length, j->autoregressive ? " (AR)" : "");
}

/* One line per request on stderr: method, path, status, time, then the
 * generation's figures or the error's message. */
static void log_request(const char *method, const char *url, unsigned status, double seconds, const char *detail) {
    fprintf(stderr, "entmtp serve: %s %s %u %.3f s%s%s\n", method, url, status, seconds, detail[0] ? ": " : "", detail);
}

/* ------------------------------------------------------------- responses */

static enum MHD_Result respond(struct MHD_Connection *c, conn_state *cs, unsigned status, const char *type, char *body,
                               size_t len, enum MHD_ResponseMemoryMode mode) {
    if (!body) return MHD_NO; /* out of memory: drop the connection */
    struct MHD_Response *r = MHD_create_response_from_buffer(len, body, mode);
    if (!r) {
        if (mode == MHD_RESPMEM_MUST_FREE) free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    if (status == MHD_HTTP_UNAUTHORIZED) MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
    if (cs) cs->status = status;
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result respond_json(struct MHD_Connection *c, conn_state *cs, unsigned status, char *json) {
    return respond(c, cs, status, "application/json", json, json ? strlen(json) : 0, MHD_RESPMEM_MUST_FREE);
}

static enum MHD_Result respond_error(struct MHD_Connection *c, conn_state *cs, const serve_error *e) {
    if (cs) snprintf(cs->detail, sizeof cs->detail, "%s%s%.150s", e->code ? e->code : "", e->code ? ": " : "", e->message);
    return respond_json(c, cs, (unsigned)e->status, serve_error_json(e));
}

/* ------------------------------------------------------------- streaming */

typedef struct sse_stream {
    serve_server *srv;
    serve_job *job;
    double start;
    int chat, first;
    int closing_sent, done_sent;
    char id[48];
    long created;
    char *pending;
    size_t pending_len, pending_off;
} sse_stream;

static const char sse_done[] = "data: [DONE]\n\n";

/* The next event: a chunk per decoding step, then the closing chunk with
 * finish_reason and usage, then [DONE]. NULL when nothing is left. */
static char *sse_next_event(sse_stream *s) {
    serve_job *j = s->job;
    if (s->done_sent) return NULL;
    if (j->finish) {
        if (s->closing_sent) { s->done_sent = 1; return strdup(sse_done); }
        s->closing_sent = 1;
        return serve_chunk_json(j, s->chat, s->id, s->created, NULL, 0, s->first);
    }
    const char *delta;
    size_t len;
    serve_error e = { 0 };
    if (!serve_job_step(j, &delta, &len, &e)) {
        /* headers are gone: report in-band, OpenAI style, and end */
        char *err = serve_error_json(&e);
        size_t n = err ? strlen(err) : 0;
        char *ev = err ? malloc(n + 8 + sizeof sse_done) : NULL;
        if (ev) snprintf(ev, n + 8 + sizeof sse_done, "data: %s\n\n%s", err, sse_done);
        free(err);
        s->done_sent = 1;
        return ev;
    }
    char *ev = serve_chunk_json(j, s->chat, s->id, s->created, delta ? delta : "", len, s->first);
    s->first = 0;
    return ev;
}

static ssize_t sse_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    sse_stream *s = cls;
    while (s->pending_off >= s->pending_len) {
        free(s->pending);
        s->pending = sse_next_event(s);
        s->pending_off = 0;
        s->pending_len = s->pending ? strlen(s->pending) : 0;
        if (!s->pending) return s->done_sent ? MHD_CONTENT_READER_END_OF_STREAM : MHD_CONTENT_READER_END_WITH_ERROR;
    }
    size_t n = s->pending_len - s->pending_off;
    if (n > max) n = max;
    memcpy(buf, s->pending + s->pending_off, n);
    s->pending_off += n;
    return (ssize_t)n;
}

/* Called when the stream ends or the client goes away: frees the session. */
static void sse_free(void *cls) {
    sse_stream *s = cls;
    char detail[200];
    job_detail(s->job, detail, sizeof detail);
    if (!s->done_sent) snprintf(detail + strlen(detail), sizeof detail - strlen(detail), ", ended early");
    log_request("POST", s->chat ? "/v1/chat/completions" : "/v1/completions", 200, emt_now() - s->start, detail);
    serve_job_free(s->job);
    gate_leave(s->srv->gate);
    free(s->pending);
    free(s);
}

/* ------------------------------------------------------------ generation */

static enum MHD_Result serve_generation(serve_server *srv, struct MHD_Connection *c, conn_state *cs, int chat,
                                        const char *body, size_t len) {
    serve_request req;
    serve_error e;
    if (!serve_parse_request(srv->sm, chat, body, len, &req, &e)) return respond_error(c, cs, &e);
    if (!gate_enter(srv->gate)) {
        serve_request_clear(&req);
        serve_fail(&e, 503, NULL, "server_busy", srv->gate->draining ? "the server is shutting down"
                   : "all %d generation slots and %d queue places are taken; retry later",
                   srv->gate->parallel, srv->gate->queue_max);
        return respond_error(c, cs, &e);
    }
    serve_job *j = NULL;
    int ok = serve_job_start(srv->sm, &req, &j, &e);
    int stream = req.stream;
    serve_request_clear(&req);
    if (!ok) { gate_leave(srv->gate); return respond_error(c, cs, &e); }

    char id[48];
    snprintf(id, sizeof id, "%s-%lu", chat ? "chatcmpl" : "cmpl", (unsigned long)atomic_fetch_add(&srv->next_id, 1));
    long created = (long)time(NULL);
    if (!stream) {
        const char *delta;
        size_t dlen;
        while (!j->finish && (ok = serve_job_step(j, &delta, &dlen, &e))) {}
        char *json = ok ? serve_result_json(j, chat, id, created) : NULL;
        if (ok) job_detail(j, cs->detail, sizeof cs->detail);
        serve_job_free(j);
        gate_leave(srv->gate);
        return ok ? respond_json(c, cs, MHD_HTTP_OK, json) : respond_error(c, cs, &e);
    }
    sse_stream *s = calloc(1, sizeof *s);
    struct MHD_Response *r = s ? MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, sse_read, s, sse_free) : NULL;
    if (!r) {
        free(s);
        serve_job_free(j);
        gate_leave(srv->gate);
        return MHD_NO;
    }
    *s = (sse_stream){ .srv = srv, .job = j, .chat = chat, .first = 1, .created = created, .start = cs->start };
    cs->streamed = 1;
    snprintf(s->id, sizeof s->id, "%s", id);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r); /* sse_free runs when the connection lets go of it */
    return ret;
}

/* ---------------------------------------------------------------- routing */

/* "Authorization: Bearer KEY", compared in constant time */
static int authorized(const serve_model *sm, struct MHD_Connection *c) {
    if (!sm->api_key) return 1;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!h || strncasecmp(h, "Bearer ", 7)) return 0;
    h += 7;
    size_t n = strlen(h), m = strlen(sm->api_key);
    unsigned diff = n != m;
    for (size_t i = 0; i < n; i++) diff |= (unsigned char)h[i] ^ (unsigned char)sm->api_key[i % (m ? m : 1)];
    return diff == 0;
}

static enum MHD_Result route(serve_server *srv, struct MHD_Connection *c, conn_state *cs, const char *url, int post) {
    const serve_model *sm = srv->sm;
    serve_error e = { 0 };
    /* the health check and the (static) chat page stay open to probes and browsers */
    int open = !strcmp(url, "/health") || (!post && !strcmp(url, "/"));
    if (!open && !authorized(sm, c)) {
        serve_fail(&e, 401, NULL, "invalid_api_key", "%s: missing or wrong API key: send \"Authorization: Bearer KEY\" "
                   "with the key the server was started with (--api-key)", url);
        return respond_error(c, cs, &e);
    }
    int chat = !strcmp(url, "/v1/chat/completions");
    if (chat || !strcmp(url, "/v1/completions")) {
        if (!post) {
            serve_fail(&e, 405, NULL, NULL, "%s: use POST", url);
            return respond_error(c, cs, &e);
        }
        if (cs->too_large) {
            serve_fail(&e, 413, "body", "request_too_large", "body: larger than the server's limit of %zu bytes", sm->max_body);
            return respond_error(c, cs, &e);
        }
        return serve_generation(srv, c, cs, chat, cs->data ? cs->data : "", cs->len);
    }
    if (post) {
        serve_fail(&e, 404, NULL, NULL, "%s: no such endpoint", url);
        return respond_error(c, cs, &e);
    }
    if (!strcmp(url, "/")) {
        return respond(c, cs, MHD_HTTP_OK, "text/html; charset=utf-8", (char *)serve_chat_html, serve_chat_html_len,
                       MHD_RESPMEM_PERSISTENT);
    }
    if (!strcmp(url, "/health")) {
        serve_gate *g = srv->gate;
        pthread_mutex_lock(&g->mu);
        char *json = malloc(160);
        int draining = g->draining;
        if (json) snprintf(json, 160, "{\"status\":\"%s\",\"active\":%d,\"queued\":%d,\"parallel\":%d}",
                           draining ? "draining" : "ok", g->active, g->waiting, g->parallel);
        pthread_mutex_unlock(&g->mu);
        return respond_json(c, cs, draining ? MHD_HTTP_SERVICE_UNAVAILABLE : MHD_HTTP_OK, json);
    }
    if (!strcmp(url, "/v1/models")) return respond_json(c, cs, MHD_HTTP_OK, serve_models_json(sm));
    if (!strcmp(url, "/v1/entmtp/trees")) return respond_json(c, cs, MHD_HTTP_OK, serve_trees_json(sm));
    serve_fail(&e, 404, NULL, NULL, "%s: no such endpoint", url);
    return respond_error(c, cs, &e);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    (void)version;
    serve_server *srv = cls;
    const serve_model *sm = srv->sm;
    int post = !strcmp(method, MHD_HTTP_METHOD_POST);
    if (!*con_cls) { /* first call: headers only */
        conn_state *cs = calloc(1, sizeof *cs);
        if (!cs) return MHD_NO;
        cs->start = emt_now();
        snprintf(cs->method, sizeof cs->method, "%s", method);
        snprintf(cs->url, sizeof cs->url, "%s", url);
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (post && cl && strtoull(cl, NULL, 10) > sm->max_body) cs->too_large = 1;
        *con_cls = cs;
        return MHD_YES;
    }
    conn_state *cs = *con_cls;
    if (post && *upload_size) { /* body bytes; past the limit they are read and dropped */
        if (!cs->too_large && cs->len + *upload_size > sm->max_body) {
            cs->too_large = 1;
            free(cs->data);
            cs->data = NULL;
        }
        if (!cs->too_large) {
            if (cs->len + *upload_size + 1 > cs->cap) {
                size_t cap = (cs->len + *upload_size + 1) * 2;
                char *d = realloc(cs->data, cap);
                if (!d) return MHD_NO;
                cs->data = d;
                cs->cap = cap;
            }
            memcpy(cs->data + cs->len, upload, *upload_size);
            cs->len += *upload_size;
        }
        *upload_size = 0;
        return MHD_YES;
    }
    return route(srv, c, cs, url, post);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode t) {
    (void)cls, (void)c;
    conn_state *cs = *con_cls;
    if (cs && !cs->streamed) {
        if (!cs->status) snprintf(cs->detail, sizeof cs->detail, "no response (connection %s)",
                                  t == MHD_REQUEST_TERMINATED_TIMEOUT_REACHED ? "timed out" : "closed");
        log_request(cs->method, cs->url, cs->status, emt_now() - cs->start, cs->detail);
    }
    if (cs) free(cs->data);
    free(cs);
    *con_cls = NULL;
}

int serve_http_start(const serve_model *sm, serve_gate *gate, const char *host, int port,
                     serve_server **out, int *bound_port) {
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE }, *ai = NULL;
    char port_s[16];
    snprintf(port_s, sizeof port_s, "%d", port);
    int gai = getaddrinfo(host, port_s, &hints, &ai);
    if (gai) {
        fprintf(stderr, "entmtp serve: --host: '%s': %s\n", host, gai_strerror(gai));
        return 0;
    }
    serve_server *s = calloc(1, sizeof *s);
    if (!s) { freeaddrinfo(ai); return 0; }
    s->sm = sm;
    s->gate = gate;
    atomic_init(&s->next_id, 1);
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL |
                     MHD_USE_ITC | MHD_USE_ERROR_LOG | (ai->ai_family == AF_INET6 ? MHD_USE_IPv6 : 0);
    s->daemon = MHD_start_daemon(flags, (uint16_t)port, NULL, NULL, on_request, s,
                                 MHD_OPTION_SOCK_ADDR, ai->ai_addr,
                                 MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                                 MHD_OPTION_CONNECTION_LIMIT, (unsigned)(gate->parallel + gate->queue_max + 64),
                                 MHD_OPTION_CONNECTION_TIMEOUT, 120u,
                                 MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!s->daemon) {
        fprintf(stderr, "entmtp serve: cannot listen on %s:%d (port in use?)\n", host, port);
        free(s);
        return 0;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
    *bound_port = info ? info->port : port;
    *out = s;
    return 1;
}

void serve_http_drain_and_stop(serve_server *s) {
    serve_gate *g = s->gate;
    MHD_socket listener = MHD_quiesce_daemon(s->daemon); /* no new connections */
    if (listener != MHD_INVALID_SOCKET) close(listener);
    pthread_mutex_lock(&g->mu);
    g->draining = 1;               /* queued and new requests get 503 */
    pthread_cond_broadcast(&g->cv);
    while (g->active > 0) pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
    MHD_stop_daemon(s->daemon);
    free(s);
}
