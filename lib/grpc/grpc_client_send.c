/*
 * The gRPC client's request side of stream calls (grpc_client_stream):
 * more request messages on an open call and its half-close. The body's
 * data provider (grpc_client_conn.c) defers while nothing is queued; a
 * send resumes it. The re-entrancy rules are grpc_client_int.h's.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "grpc_client_int.h"

/* Has nghttp2 take the call's body up again, and the loop send it: sending
 * here could fail, close the connection and run done inside the caller's
 * send (grpc.h promises it does not). */
void
gcli_call_resume(struct grpc_ccall *cc)
{
	struct grpc_client *cli = cc->cli;
	struct cconn *conn = cc->conn;

	gcli_enter(cli);
	if (cc->stream_id > 0 && !cc->stream_closed && conn != NULL &&
	    conn->state == CCONN_READY && conn->h2 != NULL)
		(void)nghttp2_session_resume_data(conn->h2, cc->stream_id);
	if (cli->busy == 1)
		cli->flush_later = 1;
	gcli_leave(cli);
}

static int
call_can_send(const struct grpc_ccall *cc)
{
	if (cc == NULL || !cc->open_send)
		return -EINVAL;
	if (cc->finished || cc->send_closed || cc->cli->dead)
		return -EPIPE;
	return 0;
}

int
grpc_ccall_send(struct grpc_ccall *cc, const ProtobufCMessage *msg)
{
	uint8_t *frame, *nreq;
	size_t len;
	int rc;

	if (msg == NULL)
		return -EINVAL;
	if ((rc = call_can_send(cc)) != 0)
		return rc;
	if ((rc = grpc_frame_pack(msg, cc->cli->opts.max_message, &frame,
	    &len)) != 0)
		return rc;
	/* Drop what has been sent before growing the queue. */
	if (cc->req_off > 0) {
		memmove(cc->req, cc->req + cc->req_off,
		    cc->req_len - cc->req_off);
		cc->req_len -= cc->req_off;
		cc->req_off = 0;
	}
	if ((nreq = realloc(cc->req, cc->req_len + len)) == NULL) {
		free(frame);
		return -ENOMEM;
	}
	memcpy(nreq + cc->req_len, frame, len);
	free(frame);
	cc->req = nreq;
	cc->req_len += len;
	gcli_call_resume(cc);
	return 0;
}

int
grpc_ccall_close_send(struct grpc_ccall *cc)
{
	int rc;

	if ((rc = call_can_send(cc)) != 0)
		return rc;
	cc->send_closed = 1;
	gcli_call_resume(cc);
	return 0;
}
