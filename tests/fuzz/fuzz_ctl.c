/*
 * Fuzz target for what rdzvctl does with rdzvd's replies once the client
 * has decoded them: ctl_received() (the terminal escapes of every string,
 * the fixed clock of the golden tests), the text of `status` and `status
 * ID` (jobtext_list, jobtext_detail), the lines and screens of `status
 * --watch` (watch_print_changes, and the views it redraws) and the JSON of
 * `-o json` (json.c). rdzvctl's sources are linked without main.c; the
 * calls themselves (call.c's ctl_call, watch_run) and the printing that
 * the commands do inline after their call (events, server, the actions'
 * one-line answers) are not reached.
 *
 * Input layout (tests/fuzz/make_corpus_ctl.py writes the seeds):
 *   byte 0   bits 0-2: what the rest is, modulo 5: 0 a Job (GetJob and
 *            the actions), 1 a ListJobsResponse, 2 a Watch stream (each
 *            WatchEvent behind a 2-byte big-endian length), 3 a
 *            ListEventsResponse, 4 a ServerInfoResponse; bit 3: the fixed
 *            clock of RDZVCTL_TEST_NOW_MS; bit 4: --all; bit 5: the watch
 *            follows one job rather than all
 *   rest     the message(s), as rdzvd packs them
 *
 * A message that does not decode, or whose strings are not UTF-8, is
 * skipped: the client refuses it before rdzvctl sees it
 * (lib/grpc/grpc_client.c). Each message is handled twice, as text and as JSON.
 *
 * Invariants checked (a violation aborts): after ctl_received() no string
 * of a message holds a control character (C0, DEL, C1) or invalid UTF-8;
 * the text printed (to a memory stream, and stdout, which is a memfd here)
 * is valid UTF-8 with no control character but the newline; the JSON
 * printed is valid UTF-8 with no raw control character but the newline.
 */
#include <sys/mman.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"
#include "pb_strings.h"
#include "rdzvctl.h"
#include "text.h"

/* Jobs a watch keeps, as watch.c keeps them; more are dropped. */
#define WATCH_MAX_JOBS	64
/* A fixed "now", so that ages do not depend on when the input ran. */
#define FUZZ_NOW_MS	1700000000000LL

/* main.c's, which the target leaves out: the option parsers of the
 * commands call it. */
int
ctl_usage_error(const char *fmt, ...)
{
	return CTL_EXIT_USAGE;
}

/* stdout, where rdzvctl prints its --watch lines and its JSON: a memfd,
 * read back after each input. */
static int out_fd = -1, saved_stdout = -1;

/* At exit: what is still buffered (the driver's summary) goes to the real
 * stdout; each input's output was read back already. */
static void
restore_stdout(void)
{
	if (saved_stdout >= 0)
		dup2(saved_stdout, STDOUT_FILENO);
	fflush(stdout);
}

static void
setup_once(void)
{
	if (out_fd >= 0)
		return;
	fflush(stdout);
	if ((out_fd = memfd_create("fuzz-ctl-stdout", MFD_CLOEXEC)) < 0 ||
	    (saved_stdout = dup(STDOUT_FILENO)) < 0 ||
	    dup2(out_fd, STDOUT_FILENO) < 0) {
		perror("fuzz: stdout");
		abort();
	}
	atexit(restore_stdout);
}

/* Valid UTF-8, no C0 but what |allow| lets through, no DEL or C1 unless
 * |c1_ok|. */
static void
check_text(const char *s, size_t len, const char *allow, int c1_ok)
{
	FUZZ_ASSERT(utf8_valid(s, len));
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c < 0x20)
			FUZZ_ASSERT(c != '\0' && strchr(allow, c) != NULL);
		if (!c1_ok) {
			FUZZ_ASSERT(c != 0x7f);
			/* U+0080 to U+009F: C2 80 to C2 9F. */
			FUZZ_ASSERT(!(c == 0xc2 && i + 1 < len &&
			    (unsigned char)s[i + 1] >= 0x80 &&
			    (unsigned char)s[i + 1] <= 0x9f));
		}
	}
}

/* What rdzvctl printed on stdout since the last time; emptied. */
static void
check_stdout(int json)
{
	off_t end;
	char *buf;

	FUZZ_ASSERT(fflush(stdout) == 0);
	end = lseek(out_fd, 0, SEEK_END);
	FUZZ_ASSERT(end >= 0);
	if (end > 0) {
		FUZZ_ASSERT((buf = malloc((size_t)end)) != NULL);
		FUZZ_ASSERT(pread(out_fd, buf, (size_t)end, 0) == end);
		check_text(buf, (size_t)end, "\n", json);
		free(buf);
	}
	FUZZ_ASSERT(ftruncate(out_fd, 0) == 0);
	rewind(stdout);
}

static int
check_escaped(char **s, const struct pb_path *path, void *arg)
{
	check_text(*s, strlen(*s), "", 0);
	return 0;
}

/* The text rdzvctl wrote to |f| (a memory stream), checked and freed. */
static void
check_memstream(FILE *f, char **text, size_t *len)
{
	FUZZ_ASSERT(fclose(f) == 0);
	check_text(*text, *len, "\n", 0);
	free(*text);
}

static ProtobufCMessage *
decode(const ProtobufCMessageDescriptor *d, const uint8_t *p, size_t len)
{
	ProtobufCMessage *m;
	char path[128];

	if ((m = protobuf_c_message_unpack(d, NULL, len, p)) == NULL)
		return NULL;
	if (pb_utf8_check(m, path, sizeof(path)) != 0) {
		protobuf_c_message_free_unpacked(m, NULL);
		return NULL;
	}
	return m;
}

/* As ctl_call() hands a reply to a command, and the command prints it. */
static void
reply_text(struct ctl *ctl, const ProtobufCMessageDescriptor *d,
    const uint8_t *p, size_t len)
{
	ProtobufCMessage *m;
	char *text = NULL;
	size_t tlen = 0;
	FILE *f;

	if ((m = decode(d, p, len)) == NULL)
		return;
	ctl->output = CTL_OUTPUT_TEXT;
	ctl_received(ctl, m);
	pb_strings_walk(m, check_escaped, NULL);
	FUZZ_ASSERT((f = open_memstream(&text, &tlen)) != NULL);
	if (d == &rdzv__v1__job__descriptor) {
		jobtext_detail(ctl, f, (Rdzv__V1__Job *)m, true);
	} else if (d == &rdzv__v1__list_jobs_response__descriptor) {
		Rdzv__V1__ListJobsResponse *r = (Rdzv__V1__ListJobsResponse *)m;
		jobtext_list(ctl, f, r->jobs, r->n_jobs);
	}
	check_memstream(f, &text, &tlen);
	protobuf_c_message_free_unpacked(m, NULL);
}

static void
reply_json(struct ctl *ctl, const ProtobufCMessageDescriptor *d,
    const uint8_t *p, size_t len)
{
	ProtobufCMessage *m;
	json_t *o = NULL, *a;

	if ((m = decode(d, p, len)) == NULL)
		return;
	ctl->output = CTL_OUTPUT_JSON;
	ctl_received(ctl, m);
	if (d == &rdzv__v1__job__descriptor) {
		o = json_job((Rdzv__V1__Job *)m, true);
	} else if (d == &rdzv__v1__list_jobs_response__descriptor) {
		Rdzv__V1__ListJobsResponse *r = (Rdzv__V1__ListJobsResponse *)m;
		o = json_object();
		a = json_array();
		for (size_t i = 0; i < r->n_jobs; i++)
			json_array_append_new(a, json_job(r->jobs[i], false));
		json_object_set_new(o, "jobs", a);
	} else if (d == &rdzv__v1__list_events_response__descriptor) {
		Rdzv__V1__ListEventsResponse *r =
		    (Rdzv__V1__ListEventsResponse *)m;
		o = json_object();
		a = json_array();
		json_object_set_new(o, "id", json_string("job-1"));
		for (size_t i = 0; i < r->n_events; i++)
			json_array_append_new(a, json_event(r->events[i]));
		json_object_set_new(o, "events", a);
	} else if (d == &rdzv__v1__server_info_response__descriptor) {
		o = json_server((Rdzv__V1__ServerInfoResponse *)m);
		json_object_set_new(o, "server", json_string(ctl->server));
	}
	FUZZ_ASSERT(json_emit(o, false) == CTL_EXIT_OK);
	check_stdout(1);
	protobuf_c_message_free_unpacked(m, NULL);
}

/* ---------------------------------------------------------------- watch */

struct watch_state {
	Rdzv__V1__WatchEvent	*ev[WATCH_MAX_JOBS];	/* own their job */
	size_t			 n;
};

static ssize_t
watch_find(const struct watch_state *w, const char *id)
{
	for (size_t i = 0; i < w->n; i++)
		if (strcmp(w->ev[i]->job->rdzv_id, id) == 0)
			return (ssize_t)i;
	return -1;
}

/* The screen a terminal's --watch redraws after a message. */
static void
watch_redraw(struct ctl *ctl, const struct watch_state *w, int one_job)
{
	Rdzv__V1__Job *jobs[WATCH_MAX_JOBS];
	char *text = NULL;
	size_t tlen = 0;
	FILE *f;

	FUZZ_ASSERT((f = open_memstream(&text, &tlen)) != NULL);
	for (size_t i = 0; i < w->n; i++)
		jobs[i] = w->ev[i]->job;
	if (!one_job)
		jobtext_list(ctl, f, jobs, w->n);
	else if (w->n > 0)
		jobtext_detail(ctl, f, jobs[0], false);
	check_memstream(f, &text, &tlen);
}

/*
 * One WatchEvent as watch.c's on_msg handles it: escaped, its lines
 * against the job as last seen, then kept in place of that one (or
 * dropped when removed); and the screen redrawn.
 */
static void
watch_text(struct ctl *ctl, struct watch_state *w, int one_job,
    const uint8_t *p, size_t len)
{
	Rdzv__V1__WatchEvent *ev;
	ssize_t i;

	ev = (Rdzv__V1__WatchEvent *)decode(&rdzv__v1__watch_event__descriptor,
	    p, len);
	if (ev == NULL)
		return;
	if (ev->job == NULL) {
		rdzv__v1__watch_event__free_unpacked(ev, NULL);
		return;
	}
	ctl->output = CTL_OUTPUT_TEXT;
	ctl_received(ctl, &ev->job->base);
	pb_strings_walk(&ev->job->base, check_escaped, NULL);
	i = watch_find(w, ev->job->rdzv_id);
	watch_print_changes(ctl, i >= 0 ? w->ev[i]->job : NULL, ev->job,
	    ev->removed);
	check_stdout(0);
	if (ev->removed) {
		rdzv__v1__watch_event__free_unpacked(ev, NULL);
		if (i >= 0) {
			rdzv__v1__watch_event__free_unpacked(w->ev[i], NULL);
			memmove(&w->ev[i], &w->ev[i + 1],
			    (w->n - (size_t)i - 1) * sizeof(w->ev[0]));
			w->n--;
		}
	} else if (i >= 0) {
		rdzv__v1__watch_event__free_unpacked(w->ev[i], NULL);
		w->ev[i] = ev;
	} else if (w->n < WATCH_MAX_JOBS) {
		w->ev[w->n++] = ev;
	} else {
		rdzv__v1__watch_event__free_unpacked(ev, NULL);
	}
	watch_redraw(ctl, w, one_job);
}

/* -o json: one compact line per message. */
static void
watch_json(struct ctl *ctl, int one_job, const uint8_t *p, size_t len)
{
	Rdzv__V1__WatchEvent *ev;
	json_t *o;

	ev = (Rdzv__V1__WatchEvent *)decode(&rdzv__v1__watch_event__descriptor,
	    p, len);
	if (ev == NULL)
		return;
	if (ev->job != NULL) {
		ctl->output = CTL_OUTPUT_JSON;
		ctl_received(ctl, &ev->job->base);
		o = json_object();
		json_object_set_new(o, "job", json_job(ev->job, one_job));
		json_object_set_new(o, "removed", json_boolean(ev->removed));
		FUZZ_ASSERT(json_emit(o, true) == CTL_EXIT_OK);
		check_stdout(1);
	}
	rdzv__v1__watch_event__free_unpacked(ev, NULL);
}

static void
watch_stream(struct ctl *ctl, int one_job, const uint8_t *p, size_t len)
{
	struct watch_state w = { .n = 0 };

	for (int pass = 0; pass < 2; pass++) {
		size_t off = 0;
		while (len - off >= 2) {
			size_t n = (size_t)p[off] << 8 | p[off + 1];
			off += 2;
			if (n > len - off)
				n = len - off;
			if (pass == 0)
				watch_text(ctl, &w, one_job, p + off, n);
			else
				watch_json(ctl, one_job, p + off, n);
			off += n;
		}
	}
	for (size_t i = 0; i < w.n; i++)
		rdzv__v1__watch_event__free_unpacked(w.ev[i], NULL);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const ProtobufCMessageDescriptor *const replies[] = {
		&rdzv__v1__job__descriptor,
		&rdzv__v1__list_jobs_response__descriptor,
		NULL,	/* the Watch stream */
		&rdzv__v1__list_events_response__descriptor,
		&rdzv__v1__server_info_response__descriptor,
	};
	const ProtobufCMessageDescriptor *d;
	struct ctl ctl;

	if (size < 1 || size > 1024 * 1024)
		return 0;
	setup_once();
	memset(&ctl, 0, sizeof(ctl));
	snprintf(ctl.server, sizeof(ctl.server), "unix:/run/rdzv/rdzvd.sock");
	ctl.now_ms = FUZZ_NOW_MS;
	ctl.fixed_times = (data[0] & 8) != 0;
	ctl.all = (data[0] & 16) != 0;

	d = replies[(data[0] & 7) % (sizeof(replies) / sizeof(replies[0]))];
	if (d == NULL) {
		watch_stream(&ctl, (data[0] & 32) != 0, data + 1, size - 1);
	} else {
		reply_text(&ctl, d, data + 1, size - 1);
		reply_json(&ctl, d, data + 1, size - 1);
	}
	check_stdout(0);
	return 0;
}
