/*
 * What the fuzz targets that play a peer over a unix socket share (the
 * HTTP/2 server's, the client's and the agent's): a private scratch
 * directory, on /dev/shm where there is one, and the peer's end of a
 * connection read and measured without blocking.
 */
#ifndef RDZV_FUZZ_PEER_H
#define RDZV_FUZZ_PEER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct event_base;

/*
 * A target's setup, once per process: SIGPIPE ignored (grpc.h), a new
 * private directory made into |dir| (|len| bytes, short enough for a socket
 * path under it; aborts when it cannot: a broken setup, not a finding),
 * and with |log_name|, logging under that name at errors only, since an
 * input makes the code under test warn a lot. RDZV_FUZZ_DEBUG=1 logs
 * everything; the return value says whether it is set.
 */
int	fuzz_peer_start(const char *log_name, char *dir, size_t len);

/* Reads and drops what is waiting on |fd|: the bytes read, or -1 at the
 * other side's end. */
ssize_t	fuzz_drain(int fd);

/* Bytes written to |fd| that the other side has not read yet. */
int	fuzz_unread(int fd);

/*
 * Sends the next piece of |in| (|len| bytes) from *pos on |fd|: all that is
 * left when |maxchunk| is 0, else 1 to |maxchunk| bytes as fuzz_rand(state)
 * draws. Advances *pos; -1 when the other side is gone, else 0.
 */
int	fuzz_send_chunk(int fd, const uint8_t *in, size_t len, size_t *pos,
	    size_t maxchunk, uint32_t *state);

/* 1 while |base| has callbacks ready to run: the loop is not quiet yet. */
int	fuzz_loop_active(struct event_base *base);


#endif
