/*
 * A protobuf-c message as JSON from its descriptor, so that rdzvd's status
 * page and rdzvctl's -o json speak one vocabulary, the proto's, and a field
 * added to a message shows up in both with no code here. pbjson.h says
 * where it departs from proto3's JSON mapping and why.
 */
#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pbjson.h"
#include "text.h"

static json_t *
text(const char *s)
{
	json_t	*v = json_string(s != NULL ? s : "");

	return v != NULL ? v : json_string("(not UTF-8)");
}

/* The length of the prefix every value name of |d| shares, up to and
 * including its last '_' (JOB_STATE_ of JobState's values). */
static size_t
enum_prefix(const ProtobufCEnumDescriptor *d)
{
	size_t	n, i, k;

	if (d->n_values < 2)
		return 0;
	n = strlen(d->values[0].name);
	for (i = 1; i < d->n_values; i++) {
		const char *s = d->values[i].name;
		for (k = 0; k < n && s[k] == d->values[0].name[k]; k++)
			;
		n = k;
	}
	while (n > 0 && d->values[0].name[n - 1] != '_')
		n--;
	return n;
}

const char *
pbjson_enum_name(const ProtobufCEnumDescriptor *d, int v, char *buf,
    size_t len)
{
	const ProtobufCEnumValue *ev = protobuf_c_enum_descriptor_get_value(d,
	    v);
	size_t	 i, skip;

	if (ev == NULL) {
		snprintf(buf, len, "%d", v);
		return buf;
	}
	skip = enum_prefix(d);
	for (i = 0; ev->name[skip + i] != '\0' && i + 1 < len; i++)
		buf[i] = (char)tolower((unsigned char)ev->name[skip + i]);
	buf[i] = '\0';
	return buf;
}

static json_t *
base64(const ProtobufCBinaryData *b)
{
	static const char tab[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t	 i, o = 0;
	char	*s;
	json_t	*v;

	if ((s = malloc((b->len + 2) / 3 * 4 + 1)) == NULL)
		return NULL;
	for (i = 0; i < b->len; i += 3) {
		uint32_t x = (uint32_t)b->data[i] << 16;
		if (i + 1 < b->len)
			x |= (uint32_t)b->data[i + 1] << 8;
		if (i + 2 < b->len)
			x |= b->data[i + 2];
		s[o++] = tab[x >> 18 & 63];
		s[o++] = tab[x >> 12 & 63];
		s[o++] = i + 1 < b->len ? tab[x >> 6 & 63] : '=';
		s[o++] = i + 2 < b->len ? tab[x & 63] : '=';
	}
	s[o] = '\0';
	v = json_string(s);
	free(s);
	return v;
}

/* One value of field |f| at |p|. */
static json_t *
value(const ProtobufCFieldDescriptor *f, const void *p)
{
	char	name[64];

	switch (f->type) {
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_SINT32:
	case PROTOBUF_C_TYPE_SFIXED32:
		return json_integer(*(const int32_t *)p);
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_FIXED32:
		return json_integer(*(const uint32_t *)p);
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
		return json_integer(*(const int64_t *)p);
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
		return json_integer((json_int_t)*(const uint64_t *)p);
	case PROTOBUF_C_TYPE_FLOAT:
		return json_real(*(const float *)p);
	case PROTOBUF_C_TYPE_DOUBLE:
		return json_real(*(const double *)p);
	case PROTOBUF_C_TYPE_BOOL:
		return json_boolean(*(const protobuf_c_boolean *)p);
	case PROTOBUF_C_TYPE_ENUM:
		return json_string(pbjson_enum_name(f->descriptor,
		    *(const int *)p, name, sizeof(name)));
	case PROTOBUF_C_TYPE_STRING:
		return text(*(char *const *)p);
	case PROTOBUF_C_TYPE_BYTES:
		return base64(p);
	case PROTOBUF_C_TYPE_MESSAGE:
		if (*(ProtobufCMessage *const *)p == NULL)
			return json_null();
		return pbjson_message(*(ProtobufCMessage *const *)p);
	}
	return json_null();
}

static size_t
elem_size(ProtobufCType t)
{
	switch (t) {
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
		return 8;
	case PROTOBUF_C_TYPE_DOUBLE:
		return sizeof(double);
	case PROTOBUF_C_TYPE_BOOL:
		return sizeof(protobuf_c_boolean);
	case PROTOBUF_C_TYPE_ENUM:
		return sizeof(int);
	case PROTOBUF_C_TYPE_STRING:
	case PROTOBUF_C_TYPE_MESSAGE:
		return sizeof(void *);
	case PROTOBUF_C_TYPE_BYTES:
		return sizeof(ProtobufCBinaryData);
	default:
		return 4;
	}
}

json_t *
pbjson_message(const ProtobufCMessage *m)
{
	const ProtobufCMessageDescriptor *d = m->descriptor;
	const char	*base = (const char *)m;
	json_t		*o = json_object(), *v;

	if (o == NULL)
		return NULL;
	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		const void *p = base + f->offset;

		if (f->label == PROTOBUF_C_LABEL_REPEATED) {
			size_t n = *(const size_t *)(base + f->quantifier_offset);
			const char *a = *(const char *const *)p;
			v = json_array();
			for (size_t k = 0; v != NULL && k < n; k++)
				if (json_array_append_new(v, value(f, a + k *
				    elem_size(f->type))) != 0) {
					json_decref(v);
					v = NULL;
				}
		} else if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
			/* Only the member of a oneof that is set. */
			if (*(const uint32_t *)(base + f->quantifier_offset) !=
			    f->id)
				continue;
			v = value(f, p);
		} else if (f->label == PROTOBUF_C_LABEL_OPTIONAL &&
		    f->quantifier_offset != 0 && f->type !=
		    PROTOBUF_C_TYPE_MESSAGE && f->type !=
		    PROTOBUF_C_TYPE_STRING &&
		    !*(const protobuf_c_boolean *)(base + f->quantifier_offset))
			v = json_null();	/* proto3 optional, not set */
		else
			v = value(f, p);
		if (v == NULL || json_object_set_new(o, f->name, v) != 0) {
			json_decref(o);
			return NULL;
		}
	}
	return o;
}

static int
named(const char *const *list, const char *name)
{
	for (; *list != NULL; list++)
		if (strcmp(*list, name) == 0)
			return 1;
	return 0;
}

int
pbjson_add_rest(json_t *o, const ProtobufCMessage *m,
    const char *const *mapped)
{
	json_t *all = pbjson_message(m), *v;
	const char *key;
	int rc = 0;

	if (all == NULL)
		return -1;
	json_object_foreach(all, key, v)
		if (!named(mapped, key) && json_object_get(o, key) == NULL &&
		    json_object_set(o, key, v) != 0)
			rc = -1;
	json_decref(all);
	return rc;
}

char *
pbjson_dumps(const json_t *j, size_t flags)
{
	char	*s, *out;
	size_t	 len, i, o = 0, n;
	uint32_t cp;

	if ((s = json_dumps(j, flags)) == NULL)
		return NULL;
	len = strlen(s);
	/* A hidden character is 2 or 3 bytes and becomes 6. */
	if ((out = malloc(len * 3 + 1)) == NULL) {
		free(s);
		return NULL;
	}
	for (i = 0; i < len; i += n) {
		if ((unsigned char)s[i] < 0x80 ||
		    (n = utf8_decode(s + i, len - i, &cp)) == 0) {
			out[o++] = s[i];
			n = 1;
			continue;
		}
		if (text_cp_hidden(cp))
			o += (size_t)sprintf(out + o, "\\u%04x", (unsigned)cp);
		else {
			memcpy(out + o, s + i, n);
			o += n;
		}
	}
	out[o] = '\0';
	free(s);
	return out;
}
