/*
 * The rdzv_id rule (SPEC §2): 1 to 128 characters of A-Za-z0-9._:@+-, and
 * not "none". rdzvd refuses other ids; rdzv-agent checks --id and the
 * schedulers' variables with the same rule before it dials.
 */
#ifndef RDZV_RDZV_ID_H
#define RDZV_RDZV_ID_H

#include <stddef.h>

#define RDZV_ID_MAX	128	/* characters of an rdzv_id */

/* 0 if |id| is a valid rdzv_id, else -EINVAL and a message in |err|
 * that names the problem (and never echoes the id's bytes). */
int	rdzv_id_check(const char *id, char *err, size_t errlen);

#endif
