/*
 * Aligned text tables, as bgpctl and `ps` print them: a header row in
 * capitals, columns two spaces apart, each as wide as its widest cell, no
 * trailing blanks, so the output reads at a glance and cuts well with awk.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "rdzvctl.h"

#define GAP	2

struct table {
	size_t	  ncols;
	size_t	  ncells;	/* header cells included */
	size_t	  cap;
	char	**cells;
};

/* Display width: UTF-8 continuation bytes take no column. */
static size_t
width(const char *s)
{
	size_t	n = 0;

	for (; *s != '\0'; s++)
		if (((unsigned char)*s & 0xc0) != 0x80)
			n++;
	return n;
}

static void
push(struct table *t, char *cell)
{
	if (t->ncells == t->cap) {
		t->cap = t->cap ? t->cap * 2 : 64;
		t->cells = xreallocarray(t->cells, t->cap, sizeof(*t->cells));
	}
	t->cells[t->ncells++] = cell;
}

struct table *
table_new(size_t ncols, const char *const *headers)
{
	struct table	*t;

	t = xcalloc(1, sizeof(*t));
	t->ncols = ncols;
	for (size_t i = 0; i < ncols; i++)
		push(t, xstrdup(headers[i]));
	return t;
}

void
table_cell(struct table *t, const char *fmt, ...)
{
	va_list	 ap;
	char	*s;

	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		fatal("table");
	va_end(ap);
	/* Cells are one line each. */
	for (char *p = s; *p != '\0'; p++)
		if (*p == '\n' || *p == '\t')
			*p = ' ';
	push(t, s);
}

size_t
table_rows(const struct table *t)
{
	return t->ncells / t->ncols - 1;
}

void
table_print(const struct table *t, FILE *f, const char *indent)
{
	size_t	*w, i, c;

	w = xcalloc(t->ncols, sizeof(*w));
	for (i = 0; i < t->ncells; i++) {
		size_t n = width(t->cells[i]);
		if (n > w[i % t->ncols])
			w[i % t->ncols] = n;
	}
	for (i = 0; i < t->ncells; i += t->ncols) {
		/* The last row may be short if a caller stopped early. */
		size_t last = t->ncols;
		if (i + last > t->ncells)
			last = t->ncells - i;
		/* No padding after the last non-empty cell of a row. */
		while (last > 1 && t->cells[i + last - 1][0] == '\0')
			last--;
		fputs(indent, f);
		for (c = 0; c < last; c++) {
			const char *s = t->cells[i + c];
			fputs(s, f);
			if (c + 1 < last)
				fprintf(f, "%*s", (int)(w[c] - width(s) + GAP),
				    "");
		}
		fputc('\n', f);
	}
	free(w);
}

void
table_free(struct table *t)
{
	if (t == NULL)
		return;
	for (size_t i = 0; i < t->ncells; i++)
		free(t->cells[i]);
	free(t->cells);
	free(t);
}
