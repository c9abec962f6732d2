/*
 * One help formatter for rdzvd, rdzv-agent and rdzvctl: every option line
 * of every --help has its option in a column of its own and its text from
 * column 32, wrapped before column 80; an option too long for its column
 * stands on a line of its own with its text below. The help texts say
 * what, this file how it is laid out.
 */
#ifndef RDZV_HELPFMT_H
#define RDZV_HELPFMT_H

#include <stdio.h>

#define HELP_TEXT_COL	32	/* where an option's text starts */
#define HELP_WIDTH	79	/* the last column used */

/* One item: "  OPT" then TEXT, wrapped. */
void	help_item(FILE *, const char *opt, const char *text);

/*
 * A help text: a line that starts with two spaces and a dash is an
 * option, its text after the first run of two or more spaces (or on the
 * lines below); a line indented by eight spaces or more continues the
 * text of the option above. Both are laid out as help_item() does. Any
 * other line is printed as it is.
 */
void	help_text(FILE *, const char *text);

#endif
