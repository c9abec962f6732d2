/* Error messages into a caller's buffer, the way lib/ and the store
 * report them. */
#ifndef RDZV_ERRF_H
#define RDZV_ERRF_H

#include <stddef.h>

/* Formats into err (errlen bytes; err may be NULL) and returns -1. */
int	errf(char *err, size_t errlen, const char *fmt, ...)
	    __attribute__((format(printf, 3, 4)));

#endif
