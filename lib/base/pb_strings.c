#include <stdio.h>
#include <string.h>

#include "pb_strings.h"
#include "text.h"

void
pb_path_format(const struct pb_path *p, char *buf, size_t len)
{
	size_t	i, at = 0;

	if (len == 0)
		return;
	buf[0] = '\0';
	for (i = 0; i < p->depth && i < PB_PATH_DEPTH && at < len; i++)
		at += (size_t)snprintf(buf + at, len - at, "%s%s",
		    i > 0 ? "." : "", p->names[i]);
}

static int
walk(ProtobufCMessage *m, struct pb_path *p,
    int (*fn)(char **, const struct pb_path *, void *), void *arg)
{
	const ProtobufCMessageDescriptor	*d = m->descriptor;
	const ProtobufCFieldDescriptor		*f;
	char					*field, **v;
	size_t					 n, i, k, depth = p->depth;
	int					 rc;

	p->depth++;
	for (k = 0; k < d->n_fields; k++) {
		f = &d->fields[k];
		if (f->type != PROTOBUF_C_TYPE_STRING &&
		    f->type != PROTOBUF_C_TYPE_MESSAGE)
			continue;
		field = (char *)m + f->offset;
		/* Members of a oneof share their storage: only the one set
		 * is what the storage holds. */
		if ((f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
		    *(uint32_t *)((char *)m + f->quantifier_offset) != f->id)
			continue;
		if (f->label == PROTOBUF_C_LABEL_REPEATED) {
			n = *(size_t *)((char *)m + f->quantifier_offset);
			v = *(char ***)field;
		} else {
			n = 1;
			v = (char **)field;
		}
		if (depth < PB_PATH_DEPTH)
			p->names[depth] = f->name;
		for (i = 0; i < n; i++) {
			/* Unset fields: NULL, or protobuf-c's shared "" for
			 * a proto3 string; an empty string has nothing to
			 * check or change. */
			if (v[i] == NULL || (f->type == PROTOBUF_C_TYPE_STRING &&
			    v[i][0] == '\0'))
				continue;
			if (f->type == PROTOBUF_C_TYPE_STRING)
				rc = fn(&v[i], p, arg);
			else
				rc = walk((ProtobufCMessage *)v[i], p, fn, arg);
			if (rc != 0)
				return rc;
		}
	}
	p->depth = depth;
	return 0;
}

int
pb_strings_walk(ProtobufCMessage *m,
    int (*fn)(char **, const struct pb_path *, void *), void *arg)
{
	struct pb_path	p = { .depth = 0 };

	return walk(m, &p, fn, arg);
}

struct bad {
	char	*path;
	size_t	 len;
};

static int
utf8_ok(char **s, const struct pb_path *p, void *arg)
{
	struct bad	*b = arg;

	if (utf8_valid(*s, strlen(*s)))
		return 0;
	pb_path_format(p, b->path, b->len);
	return -1;
}

int
pb_utf8_check(const ProtobufCMessage *m, char *path, size_t len)
{
	struct bad	b = { path, len };

	/* Nothing is replaced: the message is only read. */
	return pb_strings_walk((ProtobufCMessage *)m, utf8_ok, &b);
}
