/*
 * An LD_PRELOAD shim for the stall tests: while the file named by
 * $SLOWSYNC_FILE exists, fsync and fdatasync take $SLOWSYNC_MS longer, as
 * on a slow or overloaded disk. The first slow call removes the file, so
 * one commit is slow and the rest are not; with $SLOWSYNC_KEEP set the
 * file stays, and every call is slow until the test removes it (a disk
 * that is slow for a while).
 */
#include <dlfcn.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

int	fsync(int);
int	fdatasync(int);

static void
maybe_slow(void)
{
	const char	*file = getenv("SLOWSYNC_FILE");
	const char	*ms = getenv("SLOWSYNC_MS");
	struct timespec	 ts;
	long		 n;

	if (file == NULL || ms == NULL)
		return;
	if (getenv("SLOWSYNC_KEEP") != NULL ? access(file, F_OK) != 0 :
	    unlink(file) != 0)
		return;
	n = strtol(ms, NULL, 10);
	ts.tv_sec = n / 1000;
	ts.tv_nsec = (n % 1000) * 1000000L;
	while (nanosleep(&ts, &ts) != 0)
		;
}

int
fsync(int fd)
{
	int (*real)(int) = (int (*)(int))dlsym(RTLD_NEXT, "fsync");

	maybe_slow();
	return real(fd);
}

int
fdatasync(int fd)
{
	int (*real)(int) = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");

	maybe_slow();
	return real(fd);
}
