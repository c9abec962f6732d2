/*
 * The exit statuses of rdzvd, rdzv-agent and rdzvctl: one table, the same
 * meaning under the same number in all three, printed by each --help
 * (RDZV_EXIT_HELP) and written out in each man page, docs/OPERATIONS.md
 * ("Exit statuses") and the batch templates under deploy/.
 */
#ifndef RDZV_EXITCODES_H
#define RDZV_EXITCODES_H

#define RDZV_EXIT_OK		0	/* the job succeeded or closed; done */
#define RDZV_EXIT_FAILED	1	/* the job failed, or another error */
#define RDZV_EXIT_USAGE		2	/* usage or configuration */
#define RDZV_EXIT_NOT_FOUND	3	/* no such job, node or host */
#define RDZV_EXIT_REFUSED	4	/* permission denied, job closed, evicted */
#define RDZV_EXIT_UNAVAILABLE	5	/* rdzvd cannot be reached or serves not */
#define RDZV_EXIT_PROTOCOL	6	/* rdzvd sent something impossible */
/* 128+N: stopped by signal N. */

#define RDZV_EXIT_HELP							\
"\n"									\
"Exit status (the same in rdzvd, rdzv-agent and rdzvctl):\n"		\
"  0      done: the job succeeded or closed, the command did its work\n" \
"  1      the job failed, or another error (the message says which)\n" \
"  2      usage or configuration error\n"				\
"  3      not found: no such job, node or host\n"			\
"  4      refused: permission denied, the job is closed, node evicted\n" \
"  5      rdzvd unavailable: cannot be reached, or not serving\n"	\
"  6      protocol error: rdzvd sent something impossible\n"		\
"  128+N  stopped by signal N\n"

#endif
