/*
 * rdzv-agent: one per node per job. Subcommands, tmux style: each lives in
 * a file of its own (cmd_*.c), which exports its entry with its usage and
 * options; the table below lists them.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "agent.h"
#include "log.h"

static const struct cmd_entry *cmds[] = {
	&cmd_join_entry,
	&cmd_coproc_entry,
	&cmd_gpucheck_entry,
};

static void
usage(FILE *f)
{
	fprintf(f, "usage: rdzv-agent COMMAND [options]\n\ncommands:\n");
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		fprintf(f, "  %s\n", cmds[i]->usage);
	fprintf(f, "\n`rdzv-agent help COMMAND` (or `rdzv-agent COMMAND "
	    "--help`) describes a\ncommand's options.\n");
}

static const struct cmd_entry *
find_command(const char *name)
{
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (strcmp(name, cmds[i]->name) == 0)
			return cmds[i];
	return NULL;
}

/*
 * `help [COMMAND]`: the general usage, or that command's usage and
 * options, which `COMMAND --help` prints too. It does not run the command,
 * so the RDZV_* variables it would read cannot get in the way.
 */
static int
help(int argc, char **argv)
{
	const struct cmd_entry *cmd;

	if (argc < 3) {
		usage(stdout);
		return 0;
	}
	if (argc > 3) {
		fprintf(stderr, "rdzv-agent: help takes one command, not "
		    "'%s'\n", argv[3]);
		return AGENT_EXIT_USAGE;
	}
	if ((cmd = find_command(argv[2])) == NULL) {
		fprintf(stderr, "rdzv-agent: help: unknown command '%s'; the "
		    "commands are", argv[2]);
		for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
			fprintf(stderr, "%s %s", i > 0 ? "," : "",
			    cmds[i]->name);
		fputc('\n', stderr);
		return AGENT_EXIT_USAGE;
	}
	cmd->help(stdout);
	return 0;
}

int
main(int argc, char **argv)
{
	const struct cmd_entry *cmd;

	log_init("rdzv-agent", LOG_LEVEL_INFO);
	/* grpc.h: writes to a closed peer must not kill us. */
	signal(SIGPIPE, SIG_IGN);

	if (argc < 2) {
		usage(stderr);
		return AGENT_EXIT_USAGE;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		usage(stdout);
		return 0;
	}
	if (strcmp(argv[1], "help") == 0)
		return help(argc, argv);
	if (strcmp(argv[1], "--version") == 0 ||
	    strcmp(argv[1], "version") == 0) {
		printf("rdzv-agent %s\n", RDZV_VERSION);
		return 0;
	}
	if ((cmd = find_command(argv[1])) != NULL)
		return cmd->exec(argc - 1, argv + 1);
	/* Not a user's command: a preloaded worker's GPU check (forksrv.c). */
	if (strcmp(argv[1], "gpucheck-worker") == 0)
		return cmd_gpucheck_worker(argc - 1, argv + 1);
	fprintf(stderr, "rdzv-agent: unknown command '%s'; try "
	    "'rdzv-agent --help'\n", argv[1]);
	return AGENT_EXIT_USAGE;
}
