/*
 * lib/base/text.c: UTF-8 validity by RFC 3629's table, cutting at character
 * boundaries, and the escapes that keep client text off the terminal; and
 * lib/base/pb_strings.c, which finds every string of a message; and
 * lib/base/pbjson.c, messages as JSON and JSON that shows no control raw.
 */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "pb_strings.h"
#include "pbjson.h"
#include "rdzv/v1/rendezvous.pb-c.h"
#include "rdzv/v1/types.pb-c.h"
#include "text.h"

static void
test_utf8_valid(void)
{
	static const char *const good[] = {
		"", "plain ascii", "ж", "\xe2\x82\xac", "\xf0\x9f\x98\x80",
		"\xed\x9f\xbf",		/* U+D7FF, below the surrogates */
		"\xf4\x8f\xbf\xbf",	/* U+10FFFF */
		"\x1b[31m",		/* controls are valid UTF-8 */
	};
	static const char *const bad[] = {
		"\xd0",			/* a lead byte alone */
		"x\xd0",		/* cut at the end, as a byte cut does */
		"\x80",			/* a continuation alone */
		"\xc0\xaf",		/* overlong '/' */
		"\xe0\x80\xaf",		/* overlong, three bytes */
		"\xed\xa0\x80",		/* U+D800, a surrogate */
		"\xf4\x90\x80\x80",	/* above U+10FFFF */
		"\xf8\x88\x80\x80\x80",	/* five bytes */
		"\xff",
	};

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		CHECK(utf8_valid(good[i], strlen(good[i])));
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK(!utf8_valid(bad[i], strlen(bad[i])));
}

static void
test_utf8_prefix(void)
{
	/* "x" then 3 times "ж" (2 bytes each): 7 bytes. */
	const char *s = "x\xd0\xb6\xd0\xb6\xd0\xb6";

	CHECK_INT(utf8_prefix(s, 100), 7);
	CHECK_INT(utf8_prefix(s, 7), 7);
	CHECK_INT(utf8_prefix(s, 6), 5);	/* not inside the last ж */
	CHECK_INT(utf8_prefix(s, 5), 5);
	CHECK_INT(utf8_prefix(s, 2), 1);
	CHECK_INT(utf8_prefix(s, 0), 0);
	CHECK(utf8_valid(s, utf8_prefix(s, 6)));
	CHECK_INT(utf8_prefix("\xf0\x9f\x98\x80!", 3), 0);
}

static void
test_textf(void)
{
	char	buf[8];

	/* "x" then ж ж ж ж: a byte cut at 7 would leave half of one. */
	CHECK_INT(textf(buf, sizeof(buf), "x%s", "\xd0\xb6\xd0\xb6\xd0\xb6"
	    "\xd0\xb6"), 9);
	CHECK_STR(buf, "x\xd0\xb6\xd0\xb6\xd0\xb6");
	CHECK(utf8_valid(buf, strlen(buf)));
	CHECK_INT(textf(buf, sizeof(buf), "%s", "\xf0\x9f\x98\x80\xf0\x9f\x98"
	    "\x80"), 8);
	CHECK_STR(buf, "\xf0\x9f\x98\x80");
	CHECK_INT(textf(buf, sizeof(buf), "%s", "fits"), 4);
	CHECK_STR(buf, "fits");
	CHECK_INT(textf(buf, sizeof(buf), "%s", "exactly"), 7);
	CHECK_STR(buf, "exactly");

	/* textcpy cuts the same way. */
	CHECK_INT(textcpy(buf, sizeof(buf), "\xd0\xb6\xd0\xb6\xd0\xb6"
	    "\xd0\xb6"), 8);
	CHECK_STR(buf, "\xd0\xb6\xd0\xb6\xd0\xb6");
	CHECK_INT(textcpy(buf, sizeof(buf), "\xf0\x9f\x98\x80\xf0\x9f\x98"
	    "\x80"), 8);
	CHECK_STR(buf, "\xf0\x9f\x98\x80");
	CHECK_INT(textcpy(buf, sizeof(buf), "exactly"), 7);
	CHECK_STR(buf, "exactly");
	CHECK_INT(textcpy(buf, sizeof(buf), ""), 0);
	CHECK_STR(buf, "");
	buf[0] = 'z';
	CHECK_INT(textcpy(buf, 0, "none"), 4);
	CHECK_INT(buf[0], 'z');
}

static void
test_vis(void)
{
	char	buf[64], *d;

	vis_buf(buf, sizeof(buf), "\x1b[31mRED\x1b]0;x\x07\nfake\r\t");
	CHECK_STR(buf, "\\e[31mRED\\e]0;x\\x07\\nfake\\r\\t");
	vis_buf(buf, sizeof(buf), "gpu ж 100%");
	CHECK_STR(buf, "gpu ж 100%");
	vis_buf(buf, sizeof(buf), "\xc2\x9b" "2J \x7f");	/* C1 CSI, DEL */
	CHECK_STR(buf, "\\u009b2J \\x7f");
	/* Bidi override and isolate, line separator: U+202E turns "exe.txt"
	 * into what reads as "txt.exe". */
	vis_buf(buf, sizeof(buf), "a\xe2\x80\xae" "b\xe2\x81\xa6" "c"
	    "\xe2\x80\xa8" "d\xe2\x80\x8b");
	CHECK_STR(buf, "a\\u202eb\\u2066c\\u2028d\xe2\x80\x8b");
	vis_buf(buf, sizeof(buf), "x\xd0 \xff");		/* not UTF-8 */
	CHECK_STR(buf, "x\\xd0 \\xff");

	/* Never an escape or a character cut in half. */
	CHECK_INT(vis_buf(buf, 4, "ab\x1b"), 2);
	CHECK_STR(buf, "ab");
	CHECK_INT(vis_buf(buf, 3, "a\xd0\xb6"), 1);
	CHECK_STR(buf, "a");
	CHECK_INT(vis_buf(buf, 1, "abc"), 0);
	CHECK_STR(buf, "");

	/* The worst case: every byte an escape. */
	d = vis_dup("\x01\x02\xff\x80");
	CHECK_STR(d, "\\x01\\x02\\xff\\x80");
	free(d);
}

static int
count(char **s, const struct pb_path *p, void *arg)
{
	char	path[64];

	pb_path_format(p, path, sizeof(path));
	printf("  string %s = '%s'\n", path, *s);
	(*(int *)arg)++;
	return 0;
}

static void
test_pb_strings(void)
{
	Rdzv__V1__JoinEvent	ev = RDZV__V1__JOIN_EVENT__INIT;
	Rdzv__V1__Stop		stop = RDZV__V1__STOP__INIT;
	Rdzv__V1__JoinRequest	req = RDZV__V1__JOIN_REQUEST__INIT;
	Rdzv__V1__GpuResult	g0 = RDZV__V1__GPU_RESULT__INIT, g1 = g0;
	Rdzv__V1__GpuResult	*gpus[] = { &g0, &g1 };
	char			 bad[] = "x\xd0", ok[] = "fine", path[64];
	int			 n = 0;

	/* Of a oneof only the member set is walked: the others share its
	 * storage and would read a Stop as something else. */
	stop.reason = ok;
	ev.event_case = RDZV__V1__JOIN_EVENT__EVENT_STOP;
	ev.stop = &stop;
	CHECK_INT(pb_strings_walk(&ev.base, count, &n), 0);
	CHECK_INT(n, 1);
	CHECK_INT(pb_utf8_check(&ev.base, path, sizeof(path)), 0);
	stop.reason = bad;
	CHECK_INT(pb_utf8_check(&ev.base, path, sizeof(path)), -1);
	CHECK_STR(path, "stop.reason");

	/* Nested and repeated: the path names the field, not the index. */
	req.hostname = ok;
	req.n_gpus = 2;
	req.gpus = gpus;
	g0.name = ok;
	g1.name = bad;
	CHECK_INT(pb_utf8_check(&req.base, path, sizeof(path)), -1);
	CHECK_STR(path, "gpus.name");
	g1.name = ok;
	req.hostname = bad;
	CHECK_INT(pb_utf8_check(&req.base, path, sizeof(path)), -1);
	CHECK_STR(path, "hostname");
}

static void
test_pbjson(void)
{
	Rdzv__V1__Job job = RDZV__V1__JOB__INIT;
	Rdzv__V1__JobSettings st = RDZV__V1__JOB_SETTINGS__INIT;
	Rdzv__V1__Node node = RDZV__V1__NODE__INIT, *nodes[] = { &node };
	json_t *j;
	char *s;

	/* C1 and bidi controls come out as \u escapes; other text as is. */
	j = json_pack("{s:s}", "k", "a\xc2\x9b" "2J\xe2\x80\xae" "ж\x1b");
	s = pbjson_dumps(j, JSON_COMPACT);
	CHECK_STR(s, "{\"k\":\"a\\u009b2J\\u202eж\\u001B\"}");
	free(s);
	json_decref(j);

	/* The proto's names, enums as words, nested messages, repeated. */
	job.rdzv_id = "j1";
	job.state = RDZV__V1__JOB_STATE__JOB_STATE_RUNNING;
	job.restart_count = 2;
	job.created_unix_ms = 1700000000123LL;
	st.min_nodes = 3;
	job.settings = &st;
	node.hostname = "h";
	node.state = RDZV__V1__NODE_STATE__NODE_STATE_PARTICIPANT;
	node.group_rank = -1;
	job.n_nodes = 1;
	job.nodes = nodes;
	j = pbjson_message(&job.base);
	CHECK(j != NULL);
	CHECK_STR(json_string_value(json_object_get(j, "rdzv_id")), "j1");
	CHECK_STR(json_string_value(json_object_get(j, "state")), "running");
	CHECK_INT(json_integer_value(json_object_get(j, "restart_count")), 2);
	CHECK(json_integer_value(json_object_get(j, "created_unix_ms")) ==
	    1700000000123LL);
	CHECK_INT(json_integer_value(json_object_get(json_object_get(j,
	    "settings"), "min_nodes")), 3);
	json_t *n = json_array_get(json_object_get(j, "nodes"), 0);
	CHECK_STR(json_string_value(json_object_get(n, "state")),
	    "participant");
	CHECK_INT(json_integer_value(json_object_get(n, "group_rank")), -1);
	CHECK(json_is_false(json_object_get(n, "connected")));
	CHECK_INT(json_array_size(json_object_get(j, "events")), 0);
	json_decref(j);
	job.settings = NULL;
	j = pbjson_message(&job.base);
	CHECK(json_is_null(json_object_get(j, "settings")));
	json_decref(j);

	/* A shape of one's own, and the fields it does not name. */
	j = json_pack("{s:s, s:i}", "id", "j1", "restart_count", 7);
	CHECK_INT(pbjson_add_rest(j, &job.base, (const char *const[]){
	    "rdzv_id", "nodes", NULL }), 0);
	CHECK(json_object_get(j, "rdzv_id") == NULL);
	CHECK(json_object_get(j, "nodes") == NULL);
	CHECK_INT(json_integer_value(json_object_get(j, "restart_count")), 7);
	CHECK_STR(json_string_value(json_object_get(j, "state")), "running");
	CHECK(json_object_get(j, "held_failure") != NULL);
	json_decref(j);
}

int
main(void)
{
	test_utf8_valid();
	test_utf8_prefix();
	test_textf();
	test_vis();
	test_pb_strings();
	test_pbjson();
	return check_done("test_text");
}
