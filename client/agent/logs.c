/*
 * Worker output (SPEC §6): every worker writes to its own files,
 * <log-dir>/<generation>/<local_rank>/{stdout.log,stderr.log}, and torch's
 * error file goes next to them (error.json, TORCHELASTIC_ERROR_FILE).
 * Without --tee the files are the worker's stdout and stderr themselves,
 * so output costs the agent nothing. With --tee the worker writes into
 * pipes; the agent copies each chunk to the file and each line, prefixed
 * "[rank N]: ", to its own stdout or stderr.
 *
 * Creating files is slow on some file systems (a few hundred microseconds
 * per directory or file on a virtual disk), too slow to do between an
 * assignment and the exec of its workers. So the files of the next
 * generation are made ahead, once the workers of the current one run, in
 * <log-dir>/.next/, and an assignment only renames that directory to its
 * generation and hands out the open files.
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

#include "workers.h"
#include "log.h"
#include "text.h"

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
logs_free(struct logs *l)
{
	if (l->dir[0] != '\0')
		logs_unprepare(l);
	if (l->made)
		rmdir(l->dir);
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

/* The log directory: |dir| (--log-dir, made if need be), or a fresh one
 * named after the job when |dir| is NULL. */
int
logs_init(struct logs *l, const char *dir, const char *job_id, char *err,
    size_t errlen)
{
	const char *tmp = getenv("TMPDIR");
	int n;

	if (dir != NULL) {
		n = snprintf(l->dir, sizeof(l->dir), "%s", dir);
		if (n < 0 || (size_t)n >= sizeof(l->dir) ||
		    mkdirs(l->dir) != 0) {
			snprintf(err, errlen, "--log-dir %s: cannot create "
			    "it: %s", dir, strerror(errno));
			return -1;
		}
	} else {
		if (tmp == NULL || *tmp == '\0')
			tmp = "/tmp";
		n = snprintf(l->dir, sizeof(l->dir),
		    "%s/rdzv-agent-%s-XXXXXX", tmp, job_id);
		if (n < 0 || (size_t)n >= sizeof(l->dir) ||
		    mkdtemp(l->dir) == NULL) {
			snprintf(err, errlen, "cannot create a log directory "
			    "in %s: %s; give one with --log-dir", tmp,
			    strerror(errno));
			return -1;
		}
		l->made = true;
	}
	log_info("worker logs in %s", l->dir);
	return 0;
}

static int
open_log(const char *dir, const char *name)
{
	char path[700];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
}

/* Makes DIR/<rank>/ with its two logs, open; no stale error file. */
static int
make_rank(const char *dir, int rank, int fds[2])
{
	char d[600], e[700];

	fds[0] = fds[1] = -1;
	if (snprintf(d, sizeof(d), "%s/%d", dir, rank) >= (int)sizeof(d)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	snprintf(e, sizeof(e), "%s/error.json", d);
	if ((mkdir(d, 0755) != 0 && errno != EEXIST) ||
	    (unlink(e) != 0 && errno != ENOENT) ||
	    (fds[0] = open_log(d, "stdout.log")) < 0 ||
	    (fds[1] = open_log(d, "stderr.log")) < 0) {
		if (fds[0] >= 0)
			close(fds[0]);
		fds[0] = -1;
		return -1;
	}
	return 0;
}

/* Removes DIR/<rank>/ made ahead but not used, closing its files. */
static void
drop_rank(const char *dir, int rank, int fds[2])
{
	char d[600], f[700];

	for (int i = 0; i < 2; i++) {
		if (fds[i] >= 0)
			close(fds[i]);
		fds[i] = -1;
	}
	if (snprintf(d, sizeof(d), "%s/%d", dir, rank) >= (int)sizeof(d))
		return;		/* never made: the path did not fit */
	snprintf(f, sizeof(f), "%s/stdout.log", d);
	unlink(f);
	snprintf(f, sizeof(f), "%s/stderr.log", d);
	unlink(f);
	rmdir(d);
}

/*
 * Makes the files of |n| workers of the next generation ahead, in
 * <log-dir>/.next/. Off the path from assignment to exec; failures are
 * left to logs_worker_open() to meet and report.
 */
void
logs_prepare(struct logs *l, int n)
{
	struct logs_next *x = &l->next;
	char dir[600];

	if (x->ready && x->n == n)
		return;
	logs_unprepare(l);
	snprintf(dir, sizeof(dir), "%s/.next", l->dir);
	if ((x->fds = calloc((size_t)n * 2, sizeof(*x->fds))) == NULL)
		return;
	for (int i = 0; i < 2 * n; i++)
		x->fds[i] = -1;
	x->n = n;
	if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
		logs_unprepare(l);
		return;
	}
	for (int i = 0; i < n; i++) {
		if (make_rank(dir, i, x->fds + 2 * i) != 0) {
			logs_unprepare(l);
			return;
		}
	}
	x->ready = true;
}

/* Drops what was made ahead (the agent exits, or the count changed). */
void
logs_unprepare(struct logs *l)
{
	struct logs_next *x = &l->next;
	char dir[600];

	snprintf(dir, sizeof(dir), "%s/.next", l->dir);
	for (int i = 0; i < x->n; i++)
		drop_rank(dir, i, x->fds + 2 * i);
	if (x->n > 0 || x->ready)
		rmdir(dir);
	free(x->fds);
	memset(x, 0, sizeof(*x));
}

/*
 * The directory of generation |gen|: the one made ahead, renamed, when
 * there is one. Call before logs_worker_open() of its workers and
 * logs_generation_done() after.
 */
void
logs_generation(struct logs *l, uint64_t gen)
{
	struct logs_next *x = &l->next;
	char from[600], to[600];

	x->taken = false;
	if (!x->ready)
		return;
	snprintf(from, sizeof(from), "%s/.next", l->dir);
	snprintf(to, sizeof(to), "%s/%llu", l->dir,
	    (unsigned long long)gen);
	/* An existing directory (a log directory used before) is not
	 * replaced: the workers then get files made one by one. */
	if (rename(from, to) == 0)
		x->taken = true;
}

/* Ranks made ahead that this generation did not use go. */
void
logs_generation_done(struct logs *l, uint64_t gen, int n)
{
	struct logs_next *x = &l->next;
	char dir[600];

	if (!x->taken) {
		return;
	}
	snprintf(dir, sizeof(dir), "%s/%llu", l->dir,
	    (unsigned long long)gen);
	for (int i = n; i < x->n; i++)
		drop_rank(dir, i, x->fds + 2 * i);
	free(x->fds);
	memset(x, 0, sizeof(*x));
}

/*
 * The files of local rank |rank| of generation |gen| in
 * <log-dir>/<gen>/<rank>/: its stdout.log and stderr.log, open and
 * close-on-exec (the child dup2()s them), and the name of its error file
 * in |error_file|. 0, or -1 with a message.
 */
int
logs_worker_open(struct logs *l, uint64_t gen, int rank, char *error_file,
    size_t error_len, int *out_fd, int *err_fd, char *err, size_t errlen)
{
	struct logs_next *x = &l->next;
	char dir[600];
	int fds[2];

	snprintf(dir, sizeof(dir), "%s/%llu", l->dir,
	    (unsigned long long)gen);
	snprintf(error_file, error_len, "%s/%d/error.json", dir, rank);
	if (x->taken && rank < x->n) {
		*out_fd = x->fds[2 * rank];
		*err_fd = x->fds[2 * rank + 1];
		x->fds[2 * rank] = x->fds[2 * rank + 1] = -1;
		return 0;
	}
	if ((mkdir(dir, 0755) != 0 && errno != EEXIST) ||
	    make_rank(dir, rank, fds) != 0) {
		snprintf(err, errlen, "worker logs in %s/%d: %s", dir, rank,
		    strerror(errno));
		return -1;
	}
	*out_fd = fds[0];
	*err_fd = fds[1];
	return 0;
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
	if (strlen(s) < len) {
		snprintf(buf, len, "%s", s);
	} else {
		/* Cut between characters (jansson's strings are UTF-8, and
		 * rdzvd refuses a Report whose message is not), and say so. */
		size_t n = utf8_prefix(s, len > 4 ? len - 4 : len - 1);
		memcpy(buf, s, n);
		snprintf(buf + n, len - n, "%s", len > 4 ? "..." : "");
	}
	for (char *p = buf; *p != '\0'; p++)
		if (*p == '\n' || *p == '\r' || *p == '\t')
			*p = ' ';
	json_decref(root);
	return 1;
}

/*
 * The last line a worker wrote to stderr.log beside |error_file|: what a
 * script without torch's @record said as it died (gloo's "Connection
 * refused" at init, a Python traceback's last line). Control characters
 * and bytes that are not UTF-8 become spaces and '?', as rdzvd takes only
 * UTF-8. 1 with |prefix| and the line in |buf|, 0 when there is none (no
 * --log-dir, or nothing written).
 */
int
logs_stderr_tail(const char *error_file, const char *prefix, char *buf,
    size_t len)
{
	char path[PATH_MAX], tail[1024];
	const char *slash = strrchr(error_file, '/');
	size_t n, start;
	ssize_t got;
	off_t size;
	int fd;

	if (slash == NULL || len == 0)
		return 0;
	snprintf(path, sizeof(path), "%.*s/stderr.log",
	    (int)(slash - error_file), error_file);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return 0;
	size = lseek(fd, 0, SEEK_END);
	if (size > (off_t)sizeof(tail))
		size = (off_t)sizeof(tail);
	got = size > 0 ? pread(fd, tail, (size_t)size, lseek(fd, 0, SEEK_END) -
	    size) : -1;
	close(fd);
	if (got <= 0)
		return 0;
	n = (size_t)got;
	while (n > 0 && (tail[n - 1] == '\n' || tail[n - 1] == '\r' ||
	    tail[n - 1] == ' '))
		n--;
	for (start = n; start > 0 && tail[start - 1] != '\n'; start--)
		;
	if (start == n)
		return 0;
	for (size_t i = start; i < n; i++) {
		unsigned char c = (unsigned char)tail[i];
		tail[i] = c < 0x20 || c == 0x7f ? ' ' : c >= 0x80 ? '?' :
		    (char)c;
	}
	textf(buf, len, "%s%.*s", prefix, (int)(n - start), tail + start);
	return 1;
}
