/*
 * gRPC length-prefixed messages, timeouts and status messages.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grpc_wire.h"

void
grpc_reader_init(struct grpc_reader *r, size_t max)
{
	memset(r, 0, sizeof(*r));
	r->max = max;
}

void
grpc_reader_reset(struct grpc_reader *r)
{
	free(r->buf);
	grpc_reader_init(r, r->max);
}

int
grpc_reader_partial(const struct grpc_reader *r)
{
	return r->prefix_have > 0;
}

/*
 * The prefix is collected first; once whole, the message length is known and
 * checked against the limit before a buffer of that size is allocated. A
 * message that arrives whole inside one chunk is handed out without a copy.
 * The buffer is allocated only once body bytes must be kept, so it always
 * belongs to the message being read: a buffer allocated for an earlier,
 * shorter message is never reused.
 */
int
grpc_reader_feed(struct grpc_reader *r, const uint8_t *data, size_t len,
    int (*cb)(void *arg, const uint8_t *msg, size_t len), void *arg)
{
	while (len > 0) {
		if (r->prefix_have < GRPC_PREFIX_LEN) {
			size_t n = GRPC_PREFIX_LEN - r->prefix_have;
			if (n > len)
				n = len;
			memcpy(r->prefix + r->prefix_have, data, n);
			r->prefix_have += n;
			data += n;
			len -= n;
			if (r->prefix_have < GRPC_PREFIX_LEN)
				return 0;
			r->len = (size_t)r->prefix[1] << 24 |
			    (size_t)r->prefix[2] << 16 |
			    (size_t)r->prefix[3] << 8 | r->prefix[4];
			r->have = 0;
		}
		/* Checked on every pass so that a feed after an error fails
		 * the same way instead of buffering a rejected message. */
		if (r->prefix[0] != 0)
			return -RDZV_ECOMPRESSED;
		if (r->len > r->max)
			return -EMSGSIZE;

		int rc;
		if (r->have == 0 && len >= r->len) {
			/* Whole message in this chunk: no copy. */
			rc = cb(arg, data, r->len);
			data += r->len;
			len -= r->len;
		} else {
			if (len == 0)
				return 0;
			if (r->buf == NULL) {
				r->buf = malloc(r->len);
				if (r->buf == NULL)
					return -ENOMEM;
			}
			size_t n = r->len - r->have;
			if (n > len)
				n = len;
			memcpy(r->buf + r->have, data, n);
			r->have += n;
			data += n;
			len -= n;
			if (r->have < r->len)
				return 0;
			rc = cb(arg, r->buf, r->len);
			free(r->buf);
			r->buf = NULL;
		}
		r->prefix_have = 0;
		r->have = 0;
		r->len = 0;
		if (rc != 0)
			return rc;
	}
	return 0;
}

int
grpc_frame_pack(const ProtobufCMessage *msg, size_t max, uint8_t **out,
    size_t *outlen)
{
	size_t n = protobuf_c_message_get_packed_size(msg);
	if (n > max || n > UINT32_MAX)
		return -EMSGSIZE;
	uint8_t *buf = malloc(GRPC_PREFIX_LEN + n);
	if (buf == NULL)
		return -ENOMEM;
	buf[0] = 0;
	buf[1] = (uint8_t)(n >> 24);
	buf[2] = (uint8_t)(n >> 16);
	buf[3] = (uint8_t)(n >> 8);
	buf[4] = (uint8_t)n;
	protobuf_c_message_pack(msg, buf + GRPC_PREFIX_LEN);
	*out = buf;
	*outlen = GRPC_PREFIX_LEN + n;
	return 0;
}

int
grpc_timeout_parse(const char *s, size_t len, uint64_t *ms)
{
	if (len < 2 || len > 9)
		return -EINVAL;
	uint64_t v = 0;
	for (size_t i = 0; i + 1 < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	switch (s[len - 1]) {
	case 'H': *ms = v * 3600 * 1000; break;
	case 'M': *ms = v * 60 * 1000; break;
	case 'S': *ms = v * 1000; break;
	case 'm': *ms = v; break;
	case 'u': *ms = (v + 999) / 1000; break;
	case 'n': *ms = (v + 999999) / 1000000; break;
	default: return -EINVAL;
	}
	return 0;
}

/* |v| divided by |d|, rounded up, without overflow near UINT64_MAX. */
static uint64_t
div_up(uint64_t v, uint64_t d)
{
	return v / d + (v % d != 0);
}

/*
 * At most 8 digits: long timeouts fall back to coarser units, rounded up as
 * gRPC does, so the deadline the peer sees is never shorter than ours.
 */
void
grpc_timeout_format(uint64_t ms, char *buf, size_t len)
{
	if (ms < 100000000)
		snprintf(buf, len, "%llum", (unsigned long long)ms);
	else if (div_up(ms, 1000) < 100000000)
		snprintf(buf, len, "%lluS", (unsigned long long)
		    div_up(ms, 1000));
	else if (div_up(ms, 60000) < 100000000)
		snprintf(buf, len, "%lluM", (unsigned long long)
		    div_up(ms, 60000));
	else
		snprintf(buf, len, "99999999M");
}

char *
grpc_message_encode(const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t n = strlen(s);
	char *out = malloc(n * 3 + 1), *p = out;
	if (out == NULL)
		return NULL;
	for (; *s != '\0'; s++) {
		unsigned char c = (unsigned char)*s;
		if (c >= 0x20 && c <= 0x7e && c != '%') {
			*p++ = (char)c;
		} else {
			*p++ = '%';
			*p++ = hex[c >> 4];
			*p++ = hex[c & 15];
		}
	}
	*p = '\0';
	return out;
}

static int
hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

char *
grpc_message_decode(const char *s, size_t len)
{
	char *out = malloc(len + 1), *p = out;
	if (out == NULL)
		return NULL;
	for (size_t i = 0; i < len; i++) {
		int hi, lo;
		if (s[i] == '%' && i + 2 < len &&
		    (hi = hexval(s[i + 1])) >= 0 && (lo = hexval(s[i + 2])) >= 0) {
			*p++ = (char)(hi << 4 | lo);
			i += 2;
		} else {
			*p++ = s[i];
		}
	}
	*p = '\0';
	return out;
}

static void
nv(nghttp2_nv *v, const char *name, const char *value)
{
	v->name = (uint8_t *)name;
	v->namelen = strlen(name);
	v->value = (uint8_t *)value;
	v->valuelen = strlen(value);
	v->flags = NGHTTP2_NV_FLAG_NONE;
}

size_t
grpc_request_nv(nghttp2_nv *nva, const char *scheme, const char *path,
    const char *authority, const char *cred_key, const char *cred,
    const char *timeout)
{
	size_t n = 0;

	nv(&nva[n++], ":method", "POST");
	nv(&nva[n++], ":scheme", scheme);
	nv(&nva[n++], ":path", path);
	nv(&nva[n++], ":authority", authority);
	nv(&nva[n++], "te", "trailers");
	nv(&nva[n++], "content-type", "application/grpc");
	nv(&nva[n++], "user-agent", "rdzv/" RDZV_VERSION);
	if (cred_key != NULL && cred != NULL)
		nv(&nva[n++], cred_key, cred);
	if (timeout != NULL)
		nv(&nva[n++], "grpc-timeout", timeout);
	return n;
}

int
grpc_client_session_new(nghttp2_session **h2,
    const nghttp2_session_callbacks *cbs, void *arg)
{
	nghttp2_settings_entry iv[] = {
		{ NGHTTP2_SETTINGS_ENABLE_PUSH, 0 },
		{ NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE,
		  GRPC_CLIENT_STREAM_WINDOW },
	};
	nghttp2_option *opt;
	int rv;

	*h2 = NULL;
	if ((rv = nghttp2_option_new(&opt)) != 0)
		return rv;
	nghttp2_option_set_max_deflate_dynamic_table_size(opt, 0);
	rv = nghttp2_session_client_new2(h2, cbs, arg, opt);
	nghttp2_option_del(opt);
	if (rv != 0) {
		*h2 = NULL;
		return rv;
	}
	if ((rv = nghttp2_submit_settings(*h2, NGHTTP2_FLAG_NONE, iv,
	    sizeof(iv) / sizeof(iv[0]))) != 0 ||
	    (rv = nghttp2_session_set_local_window_size(*h2, NGHTTP2_FLAG_NONE,
	    0, GRPC_CLIENT_CONN_WINDOW)) != 0) {
		nghttp2_session_del(*h2);
		*h2 = NULL;
	}
	return rv;
}
