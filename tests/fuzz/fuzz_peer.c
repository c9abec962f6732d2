#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <errno.h>
#include <signal.h>
#include <linux/sockios.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "fuzz.h"
#include "fuzz_peer.h"
#include "log.h"

static void
scratch_dir(char *dir, size_t len)
{
	const char	*tmp = getenv("TMPDIR");
	struct stat	 st;

	if (stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) &&
	    access("/dev/shm", W_OK) == 0)
		tmp = "/dev/shm";
	else if (tmp == NULL || *tmp == '\0' || strlen(tmp) > 20)
		tmp = "/tmp";	/* a socket path has 108 bytes */
	snprintf(dir, len, "%s/rdzv-fuzz-XXXXXX", tmp);
	if (mkdtemp(dir) == NULL) {
		perror(dir);
		abort();
	}
}

ssize_t
fuzz_drain(int fd)
{
	uint8_t	buf[16384];
	ssize_t	n, total = 0;

	while ((n = recv(fd, buf, sizeof(buf), 0)) > 0)
		total += n;
	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK &&
	    errno != EINTR))
		return -1;
	return total;
}

int
fuzz_unread(int fd)
{
	int	n = 0;

	if (ioctl(fd, SIOCOUTQ, &n) != 0)
		return 0;
	return n;
}

int
fuzz_loop_active(struct event_base *base)
{
	return event_base_get_num_events(base, EVENT_BASE_COUNT_ACTIVE) > 0;
}

int
fuzz_peer_start(const char *log_name, char *dir, size_t len)
{
	int debug = getenv("RDZV_FUZZ_DEBUG") != NULL;

	signal(SIGPIPE, SIG_IGN);
	if (log_name != NULL)
		log_init(log_name, debug ? LOG_LEVEL_DEBUG : LOG_LEVEL_ERROR);
	scratch_dir(dir, len);
	return debug;
}

int
fuzz_send_chunk(int fd, const uint8_t *in, size_t len, size_t *pos,
    size_t maxchunk, uint32_t *state)
{
	size_t n = len - *pos;
	size_t chunk = maxchunk > 0 ? 1 + fuzz_rand(state) % maxchunk : n;
	ssize_t w;

	if (n > chunk)
		n = chunk;
	w = send(fd, in + *pos, n, MSG_NOSIGNAL);
	if (w > 0)
		*pos += (size_t)w;
	else if (w < 0 && errno != EAGAIN && errno != EINTR)
		return -1;
	return 0;
}
