/*
 * Worker output (SPEC §6): every worker writes to its own files,
 * <log-dir>/<generation>/<local_rank>/{stdout.log,stderr.log}, and torch's
 * error file goes next to them (error.json, TORCHELASTIC_ERROR_FILE).
 * Without --tee the files are the worker's stdout and stderr themselves,
 * so output costs the agent nothing. With --tee the worker writes into
 * pipes; the agent copies each chunk to the file and each line, prefixed
 * "[rank N]:", to its own stdout or stderr.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <jansson.h>

#include "agent.h"
#include "log.h"

#define TEE_LINE_MAX	(64 * 1024)	/* a longer line is cut */

struct tee {
	struct event	*ev;
	int		 rfd;
	int		 file_fd;
	int		 console;
	char		 prefix[32];
	size_t		 prefix_len;
	struct evbuffer	*line;
};

/* At exit: a directory we made and no worker used goes again. */
void
logs_free(struct agent *a)
{
	if (a->log_dir_made)
		rmdir(a->log_dir);
}

/* mkdir -p, for --log-dir. */
static int
mkdirs(const char *path)
{
	char buf[PATH_MAX];
	size_t n = strlen(path);

	if (n == 0 || n >= sizeof(buf)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(buf, path, n + 1);
	for (char *p = buf + 1; *p != '\0'; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0755) != 0 && errno != EEXIST)
			return -1;
		*p = '/';
	}
	if (mkdir(buf, 0755) != 0 && errno != EEXIST)
		return -1;
	return 0;
}

int
logs_init(struct agent *a, char *err, size_t errlen)
{
	const char *tmp = getenv("TMPDIR");
	int n;

	if (a->opts->log_dir != NULL) {
		n = snprintf(a->log_dir, sizeof(a->log_dir), "%s",
		    a->opts->log_dir);
		if (n < 0 || (size_t)n >= sizeof(a->log_dir) ||
		    mkdirs(a->log_dir) != 0) {
			snprintf(err, errlen, "--log-dir %s: cannot create "
			    "it: %s", a->opts->log_dir, strerror(errno));
			return -1;
		}
	} else {
		if (tmp == NULL || *tmp == '\0')
			tmp = "/tmp";
		n = snprintf(a->log_dir, sizeof(a->log_dir),
		    "%s/rdzv-agent-%s-XXXXXX", tmp, a->opts->id);
		if (n < 0 || (size_t)n >= sizeof(a->log_dir) ||
		    mkdtemp(a->log_dir) == NULL) {
			snprintf(err, errlen, "cannot create a log directory "
			    "in %s: %s; give one with --log-dir", tmp,
			    strerror(errno));
			return -1;
		}
		a->log_dir_made = true;
	}
	log_info("worker logs in %s", a->log_dir);
	return 0;
}

static int
open_log(const char *dir, const char *name)
{
	char path[700];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
}

/*
 * Makes <log-dir>/<gen>/<local_rank>/, opens its stdout.log and stderr.log
 * (close-on-exec: the child dup2()s them) and names the error file in
 * |w|, removing a stale one. 0, or -1 with a message.
 */
int
logs_worker_open(struct agent *a, uint64_t gen, struct worker *w,
    int *out_fd, int *err_fd, char *err, size_t errlen)
{
	char dir[600];

	*out_fd = *err_fd = -1;
	snprintf(dir, sizeof(dir), "%s/%llu", a->log_dir,
	    (unsigned long long)gen);
	if (mkdir(dir, 0755) != 0 && errno != EEXIST)
		goto fail;
	snprintf(dir, sizeof(dir), "%s/%llu/%d", a->log_dir,
	    (unsigned long long)gen, w->local_rank);
	if (mkdir(dir, 0755) != 0 && errno != EEXIST)
		goto fail;
	snprintf(w->error_file, sizeof(w->error_file), "%s/error.json", dir);
	if (unlink(w->error_file) != 0 && errno != ENOENT)
		goto fail;
	if ((*out_fd = open_log(dir, "stdout.log")) < 0 ||
	    (*err_fd = open_log(dir, "stderr.log")) < 0)
		goto fail;
	return 0;
fail:
	snprintf(err, errlen, "worker logs in %s: %s", dir, strerror(errno));
	if (*out_fd >= 0)
		close(*out_fd);
	*out_fd = -1;
	return -1;
}

/* Writes all of |iov|, retrying short writes; errors drop the rest. */
static void
write_all(int fd, struct iovec *iov, int n)
{
	while (n > 0) {
		ssize_t w = writev(fd, iov, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;
		while (n > 0 && (size_t)w >= iov->iov_len) {
			w -= (ssize_t)iov->iov_len;
			iov++;
			n--;
		}
		if (n > 0) {
			iov->iov_base = (char *)iov->iov_base + w;
			iov->iov_len -= (size_t)w;
		}
	}
}

/* One line to the console, prefixed; |nl| adds the missing newline. */
static void
tee_line(struct tee *t, size_t len, bool nl)
{
	unsigned char *p = evbuffer_pullup(t->line, (ssize_t)len);
	struct iovec iov[3] = {
		{ t->prefix, t->prefix_len },
		{ p, len },
		{ "\n", 1 },
	};

	write_all(t->console, iov, nl ? 3 : 2);
	evbuffer_drain(t->line, len);
}

static void
tee_lines(struct tee *t, bool eof)
{
	struct evbuffer_ptr nl;

	for (;;) {
		nl = evbuffer_search(t->line, "\n", 1, NULL);
		if (nl.pos < 0)
			break;
		tee_line(t, (size_t)nl.pos + 1, false);
	}
	size_t rest = evbuffer_get_length(t->line);
	if (rest >= TEE_LINE_MAX || (eof && rest > 0))
		tee_line(t, rest, true);
}

/* Reads what is there; 1 at the end of the stream. */
static int
tee_read(struct tee *t)
{
	char buf[16384];
	ssize_t n;

	for (;;) {
		n = read(t->rfd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno == EAGAIN ? 0 : 1;
		if (n == 0)
			return 1;
		struct iovec iov = { buf, (size_t)n };
		write_all(t->file_fd, &iov, 1);
		evbuffer_add(t->line, buf, (size_t)n);
		tee_lines(t, false);
		if ((size_t)n < sizeof(buf))
			return 0;
	}
}

static void
tee_cb(evutil_socket_t fd, short what, void *arg)
{
	struct tee *t = arg;

	if (tee_read(t)) {
		tee_lines(t, true);
		event_del(t->ev);
		close(t->rfd);
		t->rfd = -1;
	}
}

/* Takes ownership of |rfd| (a pipe's read end) and |file_fd|. */
struct tee *
tee_new(struct event_base *base, int rfd, int file_fd, int console,
    uint32_t rank)
{
	struct tee *t;

	if ((t = calloc(1, sizeof(*t))) == NULL)
		goto fail;
	t->rfd = rfd;
	t->file_fd = file_fd;
	t->console = console;
	t->prefix_len = (size_t)snprintf(t->prefix, sizeof(t->prefix),
	    "[rank %u]: ", rank);
	if (fcntl(rfd, F_SETFL, fcntl(rfd, F_GETFL) | O_NONBLOCK) != 0 ||
	    (t->line = evbuffer_new()) == NULL ||
	    (t->ev = event_new(base, rfd, EV_READ | EV_PERSIST, tee_cb, t)) ==
	    NULL || event_add(t->ev, NULL) != 0) {
		tee_free(t);
		return NULL;
	}
	return t;
fail:
	close(rfd);
	close(file_fd);
	return NULL;
}

/* Copies what the pipe still holds (the worker has exited), then closes. */
void
tee_free(struct tee *t)
{
	if (t == NULL)
		return;
	if (t->rfd >= 0 && t->line != NULL) {
		tee_read(t);
		tee_lines(t, true);
	}
	if (t->ev != NULL)
		event_free(t->ev);
	if (t->line != NULL)
		evbuffer_free(t->line);
	if (t->rfd >= 0)
		close(t->rfd);
	if (t->file_fd >= 0)
		close(t->file_fd);
	free(t);
}

/*
 * The message of a torch elastic error file: {"message": {"message": "...",
 * "extraInfo": {...}}} or {"message": "..."}. Newlines become spaces and a
 * long message is cut. 1 with the message, 0 when there is none.
 */
int
logs_error_message(const char *path, char *buf, size_t len)
{
	json_t *root, *m;
	json_error_t jerr;
	const char *s = NULL;

	if ((root = json_load_file(path, 0, &jerr)) == NULL)
		return 0;
	m = json_object_get(root, "message");
	if (json_is_object(m))
		m = json_object_get(m, "message");
	if (json_is_string(m))
		s = json_string_value(m);
	if (s == NULL || *s == '\0') {
		json_decref(root);
		return 0;
	}
	snprintf(buf, len, "%s", s);
	if (strlen(s) >= len && len > 4)
		memcpy(buf + len - 4, "...", 4);
	for (char *p = buf; *p != '\0'; p++)
		if (*p == '\n' || *p == '\r' || *p == '\t')
			*p = ' ';
	json_decref(root);
	return 1;
}
