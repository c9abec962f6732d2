/*
 * rdzvctl: the operator's command line (SPEC §8). This file holds the table
 * of commands and the options every command shares (--server, TLS, -o);
 * each command lives in a file named after it and brings its own options.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "log.h"
#include "rdzvctl.h"

static const struct ctl_cmd *const commands[] = {
	&cmd_status_entry,
	&cmd_close_entry,
	&cmd_abort_entry,
	&cmd_evict_entry,
	&cmd_events_entry,
	&cmd_server_entry,
	&cmd_wait_entry,
	&cmd_hosts_entry,
	&cmd_host_entry,
};
#define N_COMMANDS (sizeof(commands) / sizeof(commands[0]))

/* Options every command takes, before or after its name. */
#define SHARED_SHORTOPTS "o:hV"
static const struct option shared_longopts[] = {
	CLIENT_LONG_OPTIONS,
	{ "output", required_argument, NULL, 'o' },
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, 'V' },
};
#define N_SHARED (sizeof(shared_longopts) / sizeof(shared_longopts[0]))
#define MAX_LONGOPTS 32

#define SHARED_HELP							\
	"  -o, --output text|json        output format (default text)\n" \
	CLIENT_OPTIONS_HELP						\
	"  -h, --help                    this help\n"			\
	"  -V, --version                 rdzvctl's version\n"

#define EXIT_HELP	RDZV_EXIT_HELP

static void
usage(FILE *f)
{
	fprintf(f, "usage: rdzvctl [OPTIONS] COMMAND [ARGS] [OPTIONS]\n\n"
	    "commands:\n");
	for (size_t i = 0; i < N_COMMANDS; i++) {
		char	head[64];

		snprintf(head, sizeof(head), "%s %s", commands[i]->name,
		    commands[i]->args);
		help_item(f, head, commands[i]->summary);
	}
	fprintf(f, "\noptions of every command:\n");
	help_text(f, SHARED_HELP "\n"
	    "'rdzvctl COMMAND --help' shows a command's own options.\n"
	    EXIT_HELP);
}

static void
command_usage(const struct ctl_cmd *cmd, FILE *f)
{
	fprintf(f, "usage: rdzvctl %s %s [OPTIONS]\n%s\n\n", cmd->name,
	    cmd->args, cmd->summary);
	if (cmd->help != NULL && *cmd->help != '\0') {
		fprintf(f, "options:\n");
		help_text(f, cmd->help);
		fprintf(f, "\n");
	}
	fprintf(f, "options of every command:\n");
	help_text(f, SHARED_HELP EXIT_HELP);
}

int
ctl_usage_error(const char *fmt, ...)
{
	va_list	ap;

	fputs("rdzvctl: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return CTL_EXIT_USAGE;
}

/* Applies a shared option: 0, -1 when |ch| is not one, or an exit status
 * (> 0) on a bad value. *done is set for --help and --version. */
static int
shared_option(struct ctl *ctl, const struct ctl_cmd *cmd, int ch,
    const char *arg, bool *done)
{
	char	err[512];
	int	rc;

	switch (ch) {
	case 'o':
		if (strcmp(arg, "json") == 0)
			ctl->output = CTL_OUTPUT_JSON;
		else if (strcmp(arg, "text") == 0)
			ctl->output = CTL_OUTPUT_TEXT;
		else
			return ctl_usage_error("-o %s: the output is text or "
			    "json", arg);
		return 0;
	case 'h':
		if (cmd != NULL)
			command_usage(cmd, stdout);
		else
			usage(stdout);
		*done = true;
		return 0;
	case 'V':
		printf("rdzvctl %s\n", RDZV_VERSION);
		*done = true;
		return 0;
	}
	if ((rc = client_opts_take(&ctl->client, ch, arg, err,
	    sizeof(err))) < 0)
		return ctl_usage_error("%s", err);
	return rc == 1 ? 0 : -1;
}

/* getopt's complaint, in our words; |cmd| is NULL before the command. */
static int
bad_option(const char *cmd, int argc, char **argv, int ch)
{
	const char	*word = optind - 1 < argc ? argv[optind - 1] : "?";

	if (ch == ':')
		return ctl_usage_error("%s%s%s needs a value", cmd ? cmd : "",
		    cmd ? ": " : "", word);
	return ctl_usage_error("%s%sunknown option '%s' (see rdzvctl %s%s"
	    "--help)", cmd ? cmd : "", cmd ? ": " : "", word, cmd ? cmd : "",
	    cmd ? " " : "");
}

/* The combined table: shared options, then the command's. */
static void
build_longopts(const struct ctl_cmd *cmd, struct option *out)
{
	size_t	n = 0;

	for (size_t i = 0; i < N_SHARED; i++)
		out[n++] = shared_longopts[i];
	for (const struct option *o = cmd->longopts; o != NULL &&
	    o->name != NULL && n < MAX_LONGOPTS - 1; o++)
		out[n++] = *o;
	memset(&out[n], 0, sizeof(out[n]));
}

/* RDZVCTL_TEST_NOW_MS: a fixed "now" for golden tests (docs/RDZVCTL.md). */
static void
clock_init(struct ctl *ctl)
{
	const char	*v = getenv("RDZVCTL_TEST_NOW_MS");
	char		*end;
	long long	 ms;

	ctl->now_ms = wall_ms();
	if (v == NULL || *v == '\0')
		return;
	errno = 0;
	ms = strtoll(v, &end, 10);
	if (errno == 0 && *end == '\0' && ms > 0) {
		ctl->now_ms = ms;
		ctl->fixed_times = true;
	}
}

static const struct ctl_cmd *
find_command(const char *name)
{
	for (size_t i = 0; i < N_COMMANDS; i++)
		if (strcmp(commands[i]->name, name) == 0)
			return commands[i];
	return NULL;
}

/* A word where a command belongs that is none: usage, naming them all. */
static int
unknown_command(const char *where, const char *word)
{
	fprintf(stderr, "rdzvctl: %sunknown command '%s' (commands:", where,
	    word);
	for (size_t i = 0; i < N_COMMANDS; i++)
		fprintf(stderr, "%s %s", i > 0 ? "," : "", commands[i]->name);
	fprintf(stderr, "; rdzvctl --help)\n");
	return CTL_EXIT_USAGE;
}

int
main(int argc, char **argv)
{
	struct ctl		 ctl;
	const struct ctl_cmd	*cmd;
	struct option		 longopts[MAX_LONGOPTS];
	char			 shortopts[64];
	bool			 done = false;
	char			 err[512];
	int			 ch, rc, cargc;
	char			**cargv;

	signal(SIGPIPE, SIG_IGN);
	log_init("rdzvctl", LOG_LEVEL_WARN);
	memset(&ctl, 0, sizeof(ctl));
	if (client_opts_init(&ctl.client, err, sizeof(err)) != 0)
		return ctl_usage_error("%s", err);
	clock_init(&ctl);

	/* Shared options before the command name. */
	opterr = 0;
	while ((ch = getopt_long(argc, argv, "+:" SHARED_SHORTOPTS,
	    shared_longopts, NULL)) != -1) {
		if (ch == '?' || ch == ':')
			return bad_option(NULL, argc, argv, ch);
		if ((rc = shared_option(&ctl, NULL, ch, optarg, &done)) != 0)
			return rc > 0 ? rc : bad_option(NULL, argc, argv, '?');
		if (done)
			return CTL_EXIT_OK;
	}
	if (optind >= argc) {
		usage(stderr);
		return CTL_EXIT_USAGE;
	}
	/* help [COMMAND]: what --help prints, without running anything. */
	if (strcmp(argv[optind], "help") == 0) {
		if (optind + 1 >= argc) {
			usage(stdout);
			return CTL_EXIT_OK;
		}
		if (optind + 2 < argc)
			return ctl_usage_error("help takes one command, not "
			    "'%s'", argv[optind + 2]);
		if ((cmd = find_command(argv[optind + 1])) == NULL)
			return unknown_command("help: ", argv[optind + 1]);
		command_usage(cmd, stdout);
		return CTL_EXIT_OK;
	}
	if ((cmd = find_command(argv[optind])) == NULL)
		return unknown_command("", argv[optind]);

	/* The command's own options, anywhere after its name. */
	cargc = argc - optind;
	cargv = argv + optind;
	build_longopts(cmd, longopts);
	snprintf(shortopts, sizeof(shortopts), ":" SHARED_SHORTOPTS "%s",
	    cmd->shortopts != NULL ? cmd->shortopts : "");
	optind = 0;
	while ((ch = getopt_long(cargc, cargv, shortopts, longopts, NULL))
	    != -1) {
		if (ch == '?' || ch == ':')
			return bad_option(cmd->name, cargc, cargv, ch);
		rc = shared_option(&ctl, cmd, ch, optarg, &done);
		if (rc < 0 && cmd->option != NULL)
			rc = cmd->option(&ctl, ch, optarg);
		if (rc < 0)
			return bad_option(cmd->name, cargc, cargv, '?');
		if (rc > 0)
			return rc;
		if (done)
			return CTL_EXIT_OK;
	}
	cargc -= optind;
	cargv += optind;
	if (cargc < cmd->min_args || cargc > cmd->max_args)
		return ctl_usage_error("%s: %s (usage: rdzvctl %s %s)",
		    cmd->name, cargc < cmd->min_args ? "missing arguments" :
		    "too many arguments", cmd->name, cmd->args);
	return cmd->exec(&ctl, cargc, cargv);
}
