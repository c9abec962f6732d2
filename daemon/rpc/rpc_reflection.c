/*
 * gRPC server reflection (SPEC §15; grpc/grpc doc/server-reflection.md):
 * grpc.reflection.v1 and v1alpha ServerReflection/ServerReflectionInfo, so
 * that generic clients (grpcurl, grpcui, Postman) list rdzvd's services
 * and describe their messages without the .proto files.
 *
 * A client asks any number of questions on one bidirectional stream; each
 * is answered as it arrives. The services are those of the method table;
 * the files and symbols come from the descriptors embedded at build time
 * (proto/descriptors.h). rdzv's protos define no extensions, so questions
 * about extensions find none. The two versions are the same messages on the
 * wire, so both are served with v1's.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "descriptors.h"
#include "grpc/reflection/v1/reflection.pb-c.h"
#include "rdzvd.h"
#include "rpc_int.h"
#include "xmalloc.h"

#define HOST_MAX	255	/* a DNS name has at most 253 */

typedef Grpc__Reflection__V1__ServerReflectionRequest refl_request;
typedef Grpc__Reflection__V1__ServerReflectionResponse refl_response;

#define REQ(what) \
	GRPC__REFLECTION__V1__SERVER_REFLECTION_REQUEST__MESSAGE_REQUEST_##what
#define RESP(what) \
	GRPC__REFLECTION__V1__SERVER_REFLECTION_RESPONSE__MESSAGE_RESPONSE_##what

/* Names in error messages are cut off at this length: past it, none. */
#define MAX_NAME_SHOWN	200

static int
symbol_cmp(const void *key, const void *elem)
{
	return strcmp(key, ((const struct desc_symbol *)elem)->name);
}

/* The file defining |name| (with or without a leading dot), or -1. */
static int
symbol_file(const char *name)
{
	const struct desc_symbol *s;

	if (name[0] == '.')
		name++;
	s = bsearch(name, desc_symbols, desc_n_symbols, sizeof(desc_symbols[0]),
	    symbol_cmp);
	return s != NULL ? s->file : -1;
}

static int
file_by_name(const char *name)
{
	for (size_t i = 0; i < desc_n_files; i++)
		if (strcmp(desc_files[i].name, name) == 0)
			return (int)i;
	return -1;
}

/* An answer that is an error: the stream goes on. */
static int
send_error(struct grpc_call *call, refl_response *resp, int code,
    const char *msg)
{
	Grpc__Reflection__V1__ErrorResponse err =
	    GRPC__REFLECTION__V1__ERROR_RESPONSE__INIT;

	err.error_code = code;
	err.error_message = (char *)msg;
	resp->message_response_case = RESP(ERROR_RESPONSE);
	resp->error_response = &err;
	return grpc_call_send(call, &resp->base);
}

static int
send_not_found(struct grpc_call *call, refl_response *resp, const char *what,
    const char *name)
{
	char msg[MAX_NAME_SHOWN + 64];

	/* A name cut short could end inside a UTF-8 sequence: a long one is
	 * left out (the original request in the answer still has it). */
	if (strlen(name) <= MAX_NAME_SHOWN)
		snprintf(msg, sizeof(msg), "%s '%s' not found", what, name);
	else
		snprintf(msg, sizeof(msg), "%s not found", what);
	return send_error(call, resp, GRPC_NOT_FOUND, msg);
}

/* The file's descriptor and those of every file it imports. */
static int
send_file(struct grpc_call *call, refl_response *resp, int file)
{
	Grpc__Reflection__V1__FileDescriptorResponse fr =
	    GRPC__REFLECTION__V1__FILE_DESCRIPTOR_RESPONSE__INIT;
	const struct desc_file *f = &desc_files[file];
	int rc;

	fr.file_descriptor_proto = calloc(f->n_need,
	    sizeof(fr.file_descriptor_proto[0]));
	if (fr.file_descriptor_proto == NULL)
		return -ENOMEM;
	fr.n_file_descriptor_proto = f->n_need;
	for (size_t i = 0; i < f->n_need; i++) {
		const struct desc_file *d = &desc_files[f->need[i]];
		fr.file_descriptor_proto[i].data = (uint8_t *)d->data;
		fr.file_descriptor_proto[i].len = d->len;
	}
	resp->message_response_case = RESP(FILE_DESCRIPTOR_RESPONSE);
	resp->file_descriptor_response = &fr;
	rc = grpc_call_send(call, &resp->base);
	free(fr.file_descriptor_proto);
	return rc;
}

/* The services of the method table ("/pkg.Service/Method"), once each. */
static int
send_services(struct grpc_call *call, refl_response *resp)
{
	Grpc__Reflection__V1__ListServiceResponse lr =
	    GRPC__REFLECTION__V1__LIST_SERVICE_RESPONSE__INIT;
	Grpc__Reflection__V1__ServiceResponse *items;
	int rc = -ENOMEM;

	items = calloc(rpc_n_methods, sizeof(*items));
	lr.service = calloc(rpc_n_methods, sizeof(*lr.service));
	if (items == NULL || lr.service == NULL)
		goto out;
	for (size_t i = 0; i < rpc_n_methods; i++) {
		const char *path = rpc_methods[i].path + 1;
		size_t len = strcspn(path, "/");
		size_t j;

		for (j = 0; j < lr.n_service; j++)
			if (strncmp(lr.service[j]->name, path, len) == 0 &&
			    lr.service[j]->name[len] == '\0')
				break;
		if (j < lr.n_service)
			continue;
		grpc__reflection__v1__service_response__init(&items[j]);
		if ((items[j].name = strndup(path, len)) == NULL)
			goto out;
		lr.service[lr.n_service++] = &items[j];
	}
	resp->message_response_case = RESP(LIST_SERVICES_RESPONSE);
	resp->list_services_response = &lr;
	rc = grpc_call_send(call, &resp->base);
out:
	for (size_t j = 0; items != NULL && j < lr.n_service; j++)
		free(items[j].name);
	free(items);
	free(lr.service);
	return rc;
}

static int
answer(struct grpc_call *call, const refl_request *req)
{
	refl_response resp =
	    GRPC__REFLECTION__V1__SERVER_REFLECTION_RESPONSE__INIT;
	Grpc__Reflection__V1__ExtensionNumberResponse er =
	    GRPC__REFLECTION__V1__EXTENSION_NUMBER_RESPONSE__INIT;
	const char *type;
	int file;

	resp.valid_host = req->host;
	resp.original_request = (refl_request *)req;
	switch (req->message_request_case) {
	case REQ(LIST_SERVICES):
		return send_services(call, &resp);
	case REQ(FILE_BY_FILENAME):
		if ((file = file_by_name(req->file_by_filename)) < 0)
			return send_not_found(call, &resp, "file",
			    req->file_by_filename);
		return send_file(call, &resp, file);
	case REQ(FILE_CONTAINING_SYMBOL):
		if ((file = symbol_file(req->file_containing_symbol)) < 0)
			return send_not_found(call, &resp, "symbol",
			    req->file_containing_symbol);
		return send_file(call, &resp, file);
	case REQ(FILE_CONTAINING_EXTENSION):
		type = req->file_containing_extension->containing_type;
		return send_not_found(call, &resp, "extension of type", type);
	case REQ(ALL_EXTENSION_NUMBERS_OF_TYPE):
		/* A type we know has no extensions; one we do not, none. */
		type = req->all_extension_numbers_of_type;
		if (symbol_file(type) < 0)
			return send_not_found(call, &resp, "type", type);
		er.base_type_name = (char *)(type[0] == '.' ? type + 1 : type);
		resp.message_response_case =
		    RESP(ALL_EXTENSION_NUMBERS_RESPONSE);
		resp.all_extension_numbers_response = &er;
		return grpc_call_send(call, &resp.base);
	default:
		return send_error(call, &resp, GRPC_INVALID_ARGUMENT,
		    "the request asks nothing: set one of its questions");
	}
}

/*
 * A stream's questions not yet answered: a client that asks faster than it
 * reads its answers (300 questions at once on a busy machine) fills the
 * connection's output, and the answers wait until it reads (HTTP/2 flow
 * control). The questions behind wait here, packed, and are answered as
 * room comes back (grpc_call_on_writable). Only a client that keeps asking
 * while it reads nothing meets the bound, and its stream ends.
 */
#define WAITING_MAX	1024		/* questions */
#define WAITING_BYTES	(1u << 20)	/* their packed size */

struct waiting {
	uint8_t		*buf;
	size_t		 len;
};

struct stream {
	struct waiting	 q[WAITING_MAX];
	size_t		 head, n, bytes;
	int		 ended;		/* the client ended its side */
};

static void	drain(struct grpc_call *, void *);

/* |rc| of answer(): 1 when the answer waits for room (-ENOBUFS), 0 when it
 * went out, -1 when the call was ended here. */
static int
answered(struct grpc_call *call, const refl_request *req, int rc)
{
	if (rc == 0)
		return 0;
	if (rc == -ENOBUFS)
		return 1;
	if (rc == -EMSGSIZE)
		grpc_call_finish(call, GRPC_INVALID_ARGUMENT, "reflection: the "
		    "answer repeats the request, and this request (%zu bytes) "
		    "is too large for that; ask with shorter names",
		    protobuf_c_message_get_packed_size(&req->base));
	else
		grpc_call_finish(call, GRPC_INTERNAL, "reflection: cannot "
		    "send the answer: %s", strerror(-rc));
	return -1;
}

/* Keeps |req| for later; -1 (the call ended) past the bound. */
static int
wait_room(struct grpc_call *call, struct stream *st, const refl_request *req)
{
	size_t len = protobuf_c_message_get_packed_size(&req->base);
	struct waiting *w;

	if (st->n == WAITING_MAX || st->bytes + len > WAITING_BYTES) {
		grpc_call_finish(call, GRPC_RESOURCE_EXHAUSTED, "reflection: "
		    "the client does not read the answers (%zu questions wait "
		    "for room); ask again", st->n);
		return -1;
	}
	w = &st->q[(st->head + st->n++) % WAITING_MAX];
	w->buf = xmalloc(len > 0 ? len : 1);
	w->len = protobuf_c_message_pack(&req->base, w->buf);
	st->bytes += w->len;
	if (st->n == 1)
		grpc_call_on_writable(call, drain, st);
	return 0;
}

/* Room again: the questions that waited, in order, until one waits again. */
static void
drain(struct grpc_call *call, void *arg)
{
	struct stream *st = arg;

	while (st->n > 0) {
		struct waiting *w = &st->q[st->head];
		refl_request *req = grpc__reflection__v1__server_reflection_request__unpack(
		    NULL, w->len, w->buf);
		int rc = req == NULL ? -EINVAL : answer(call, req);

		if (req == NULL) {
			grpc_call_finish(call, GRPC_INTERNAL, "reflection: a "
			    "question kept for later could not be read back");
			return;		/* stream_closed frees what waits */
		}
		rc = answered(call, req, rc);
		protobuf_c_message_free_unpacked(&req->base, NULL);
		if (rc < 0)
			return;		/* ended: stream_closed frees the rest */
		if (rc == 1) {
			grpc_call_on_writable(call, drain, st);
			return;
		}
		free(w->buf);
		st->bytes -= w->len;
		st->head = (st->head + 1) % WAITING_MAX;
		st->n--;
	}
	if (st->ended)
		grpc_call_finish(call, GRPC_OK, NULL);
}

static void
stream_closed(struct grpc_call *call, int cancelled, void *arg)
{
	struct stream *st = arg;

	while (st->n > 0) {
		free(st->q[st->head].buf);
		st->head = (st->head + 1) % WAITING_MAX;
		st->n--;
	}
	free(st);
}

/* Each question, or the client's end of the stream. */
static void
reflection_message(struct grpc_call *call, const ProtobufCMessage *msg,
    void *arg)
{
	const refl_request *req = (const refl_request *)msg;
	struct stream *st = arg;
	size_t host_len;

	if (msg == NULL) {
		st->ended = 1;
		if (st->n == 0)
			grpc_call_finish(call, GRPC_OK, NULL);
		return;
	}
	/* Every answer repeats the host: a name, not a payload. */
	if ((host_len = strlen(req->host)) > HOST_MAX) {
		grpc_call_finish(call, GRPC_INVALID_ARGUMENT, "reflection: host "
		    "is %zu bytes; a host name has at most %d", host_len,
		    HOST_MAX);
		return;
	}
	/* Behind the questions that wait, in order. */
	if (st->n > 0 || answered(call, req, answer(call, req)) == 1)
		(void)wait_room(call, st, req);
}

void
rpc_reflection_info(struct grpc_call *call, const ProtobufCMessage *req,
    void *arg)
{
	struct stream *st = xcalloc(1, sizeof(*st));

	grpc_call_on_close(call, stream_closed, st);
	grpc_call_on_message(call, reflection_message, st);
}
