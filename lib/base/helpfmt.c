/*
 * The layout of every --help (helpfmt.h). The text of an option is one
 * paragraph: the words of its lines, wrapped anew, so that a text edited
 * in one place never runs into its option or past the margin.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "helpfmt.h"

/* Prints |text|'s words from column HELP_TEXT_COL, |col| being where the
 * line stands now, wrapped before HELP_WIDTH. */
static void
wrap(FILE *f, const char *text, size_t col)
{
	const char *p = text;
	bool first = true;

	while (*p != '\0') {
		size_t n;

		while (*p == ' ')
			p++;
		if (*p == '\0')
			break;
		n = strcspn(p, " ");
		if (!first && col + 1 + n > HELP_WIDTH) {
			fprintf(f, "\n%*s", HELP_TEXT_COL, "");
			col = HELP_TEXT_COL;
		} else if (!first) {
			fputc(' ', f);
			col++;
		}
		fwrite(p, 1, n, f);
		col += n;
		p += n;
		first = false;
	}
	fputc('\n', f);
}

void
help_item(FILE *f, const char *opt, const char *text)
{
	size_t n = strlen(opt);

	if (text == NULL || *text == '\0') {
		fprintf(f, "  %s\n", opt);
		return;
	}
	/* At least two spaces between an option and its text. */
	if (2 + n + 2 > HELP_TEXT_COL)
		fprintf(f, "  %s\n%*s", opt, HELP_TEXT_COL, "");
	else
		fprintf(f, "  %-*s", HELP_TEXT_COL - 2, opt);
	wrap(f, text, HELP_TEXT_COL);
}

/* The option of an item being gathered, and its text so far. */
struct pending {
	char	*opt;
	char	*text;
	size_t	 len, cap;
};

static void
add_text(struct pending *p, const char *s, size_t n)
{
	while (n > 0 && s[n - 1] == ' ')
		n--;
	if (p->len + n + 2 > p->cap) {
		p->cap = (p->len + n + 2) * 2;
		if ((p->text = realloc(p->text, p->cap)) == NULL)
			abort();
	}
	if (p->len > 0)
		p->text[p->len++] = ' ';
	memcpy(p->text + p->len, s, n);
	p->len += n;
	p->text[p->len] = '\0';
}

static void
flush(FILE *f, struct pending *p)
{
	if (p->opt != NULL)
		help_item(f, p->opt, p->len > 0 ? p->text : "");
	free(p->opt);
	p->opt = NULL;
	p->len = 0;
	if (p->text != NULL)
		p->text[0] = '\0';
}

void
help_text(FILE *f, const char *text)
{
	struct pending p = { 0 };
	const char *line = text;

	while (*line != '\0') {
		size_t len = strcspn(line, "\n");
		size_t lead = strspn(line, " ");

		if (lead == 2 && len > 2 && line[2] == '-') {
			/* An option: it ends at two spaces. */
			const char *o = line + 2, *end = line + len, *gap;
			size_t olen;

			flush(f, &p);
			for (gap = o; gap + 1 < end && !(gap[0] == ' ' &&
			    gap[1] == ' '); gap++)
				;
			if (gap + 1 >= end)
				gap = end;
			olen = (size_t)(gap - o);
			while (olen > 0 && o[olen - 1] == ' ')
				olen--;
			if ((p.opt = strndup(o, olen)) == NULL)
				abort();
			if (gap < end)
				add_text(&p, gap + strspn(gap, " "),
				    (size_t)(end - gap) - strspn(gap, " "));
		} else if (lead >= 8 && lead < len && p.opt != NULL) {
			add_text(&p, line + lead, len - lead);
		} else {
			flush(f, &p);
			fwrite(line, 1, len, f);
			fputc('\n', f);
		}
		line += len;
		if (*line == '\n')
			line++;
	}
	flush(f, &p);
	free(p.text);
}
