#include <errno.h>
#include <string.h>

#include "errf.h"
#include "rdzv_id.h"

#define ALLOWED	"A-Z a-z 0-9 . _ : @ + -"

int
rdzv_id_check(const char *id, char *err, size_t errlen)
{
	size_t		len, i;
	unsigned char	ch;

	len = id == NULL ? 0 : strlen(id);
	if (len == 0 || len > RDZV_ID_MAX)
		return errf(-EINVAL, err, errlen, "a job id has 1 to %d "
		    "characters, not %zu", RDZV_ID_MAX, len);
	for (i = 0; i < len; i++) {
		ch = (unsigned char)id[i];
		if ((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
		    (ch >= '0' && ch <= '9') || strchr("._:@+-", ch) != NULL)
			continue;
		if (ch > 0x20 && ch < 0x7f)
			return errf(-EINVAL, err, errlen, "'%c' (character "
			    "%zu) is not allowed in a job id (" ALLOWED ")",
			    ch, i + 1);
		return errf(-EINVAL, err, errlen, "byte 0x%02x (character "
		    "%zu) is not allowed in a job id (" ALLOWED ")", ch, i + 1);
	}
	if (strcmp(id, "none") == 0)
		return errf(-EINVAL, err, errlen, "'none' is not a job id; "
		    "pass --id (e.g. $SLURM_JOB_ID)");
	return 0;
}
