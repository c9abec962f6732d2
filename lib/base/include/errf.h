/*
 * Errors of lib/: a negative errno where one means what happened, else one
 * of the project's codes below; a message for people goes into a caller's
 * buffer through errf().
 */
#ifndef RDZV_ERRF_H
#define RDZV_ERRF_H

#include <stddef.h>

/* lib/'s own error codes, returned negated like errno values. They start
 * well above every errno so the two never meet. */
enum rdzv_error {
	RDZV_ECOMPRESSED = 4096,	/* a compressed gRPC message: none
					 * was offered */
	RDZV_EMSGCOUNT,			/* a second message where one is
					 * allowed */
};

/* Formats into err (errlen bytes; err may be NULL) and returns |rc|. */
int	errf(int rc, char *err, size_t errlen, const char *fmt, ...)
	    __attribute__((format(printf, 4, 5)));

#endif
