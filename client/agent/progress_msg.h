/*
 * The workers' progress datagram (docs/HEALTH.md): "1 LOCAL_RANK STEP",
 * the format's version and two decimal numbers, single spaces, an optional
 * newline, at most PROGRESS_MSG_MAX bytes. Apart from the rest of the agent
 * so that tests/unit and tests/fuzz build it alone.
 */
#ifndef RDZV_AGENT_PROGRESS_MSG_H
#define RDZV_AGENT_PROGRESS_MSG_H

#include <stddef.h>
#include <stdint.h>

#define PROGRESS_MSG_MAX	64	/* bytes of one datagram */
#define PROGRESS_RANK_MAX	65535	/* the largest local rank */

/* progress_msg.c */

/* The |len| bytes at |s| (not NUL-terminated): 0 with the local rank and
 * the step, or -1 when they are not one message of the format. */
int	progress_msg_parse(const char *s, size_t len, uint32_t *rank,
	    uint64_t *step);
/* The message for |rank| and |step| in |buf| (NUL-terminated); its
 * length, or -1 when |len| is too small. */
int	progress_msg_format(char *buf, size_t len, uint32_t rank,
	    uint64_t step);

#endif
