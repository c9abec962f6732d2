#include <stdio.h>
#include <string.h>

#include "pb_utf8.h"
#include "text.h"

int
pb_utf8_check(const ProtobufCMessage *m, char *path, size_t len)
{
	const ProtobufCMessageDescriptor	*d = m->descriptor;
	const ProtobufCFieldDescriptor		*f;
	char *const				*v;
	const void				*field;
	size_t					 n, i, k, at;

	for (k = 0; k < d->n_fields; k++) {
		f = &d->fields[k];
		if (f->type != PROTOBUF_C_TYPE_STRING &&
		    f->type != PROTOBUF_C_TYPE_MESSAGE)
			continue;
		field = (const char *)m + f->offset;
		if (f->label == PROTOBUF_C_LABEL_REPEATED) {
			n = *(const size_t *)((const char *)m +
			    f->quantifier_offset);
			v = *(char *const *const *)field;
		} else {
			n = 1;
			v = field;
		}
		for (i = 0; i < n; i++) {
			if (v[i] == NULL)
				continue;
			if (f->type == PROTOBUF_C_TYPE_STRING) {
				if (utf8_valid(v[i], strlen(v[i])))
					continue;
				snprintf(path, len, "%s", f->name);
				return -1;
			}
			if (pb_utf8_check((const ProtobufCMessage *)v[i], path,
			    len) == 0)
				continue;
			/* Prefix the parent's name: "gpus.name". */
			at = strlen(f->name) + 1;
			if (len > at) {
				memmove(path + at, path, len - at);
				path[len - 1] = '\0';
				memcpy(path, f->name, at - 1);
				path[at - 1] = '.';
			}
			return -1;
		}
	}
	return 0;
}
