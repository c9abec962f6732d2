/*
 * What every handler of the HTTP listener answers with: the headers every
 * answer carries, a plain-text answer, and the check of a request's path
 * that each handler makes first.
 */
#include <stdlib.h>

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "log.h"
#include "http_int.h"
#include "rdzvd.h"

void
http_reply(struct evhttp_request *req, int code, const char *reason,
    const char *type, struct evbuffer *body)
{
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);

	evhttp_add_header(h, "Content-Type", type);
	evhttp_add_header(h, "Cache-Control", "no-store");
	evhttp_add_header(h, "X-Content-Type-Options", "nosniff");
	metrics_http_request();
	evhttp_send_reply(req, code, reason, body);
}

void
http_reply_text(struct evhttp_request *req, int code, const char *reason,
    const char *text)
{
	struct evbuffer *b = evbuffer_new();

	if (b == NULL) {
		evhttp_send_error(req, HTTP_INTERNAL, NULL);
		return;
	}
	evbuffer_add_printf(b, "%s\n", text);
	http_reply(req, code, reason, "text/plain; charset=utf-8", b);
	evbuffer_free(b);
}

/*
 * What evhttp lets through but a request here may not have: a path that
 * decodes to a NUL (evhttp matches "/%00" as "/") or to another control
 * character. 0, or -1 after answering 400.
 */
int
http_request_check(struct evhttp_request *req)
{
	const char *path = evhttp_uri_get_path(evhttp_request_get_evhttp_uri(
	    req));
	size_t len = 0, i;
	char *d;
	int ok = 1;

	if (path != NULL) {
		if ((d = evhttp_uridecode(path, 0, &len)) == NULL)
			fatalx("out of memory");
		for (i = 0; i < len; i++)
			if ((unsigned char)d[i] < 0x20 || d[i] == 0x7f)
				ok = 0;
		free(d);
	}
	if (ok)
		return 0;
	http_reply_text(req, HTTP_BADREQUEST, "Bad Request", "bad request: the "
	    "path holds a control character");
	return -1;
}
