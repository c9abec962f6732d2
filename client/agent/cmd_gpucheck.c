/*
 * rdzv-agent gpucheck: the GPU check of SPEC §7 run by hand, on one
 * device or all, each in its own child process exactly as the agent runs
 * it before a join. Prints each device with the time of every step, or
 * JSON. Exit status: 0 every device checked passed, 1 any failed or no
 * GPU could be checked (no libcuda, no device), 2 usage.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "agent.h"
#include "gpucheck_run.h"
#include "helpfmt.h"
#include "parse.h"
#include "text.h"

#define DEFAULT_TIMEOUT_MS	60000

static void
gpucheck_usage(FILE *f)
{
	help_text(f,
	    "usage: rdzv-agent gpucheck [--device N|all] [-o table|json]\n"
	    "           [--gpucheck-timeout DUR] [--bytes SIZE]\n"
	    "  --device N|all           the device to check (default all)\n"
	    "  -o, --output FORMAT      table (default) or json\n"
	    "  --gpucheck-timeout DUR   kill a check still running after this\n"
	    "                           (default 60s; also --health-timeout)\n"
	    "  --bytes SIZE             test buffer per device (default "
	    "256MiB)\n"
	    "libcuda is loaded from $RDZV_LIBCUDA, else libcuda.so.1.\n"
	    "\n"
	    "Exit status: 0 every device checked passed, 1 one failed or no GPU\n"
	    "could be checked, 2 usage.\n");
}

static void
print_table(const struct gpucheck_result *rs, int n)
{
	const struct gpucheck_result	*r;
	char			 line[512];
	int			 i, passed = 0;
	uint32_t		 k;

	for (i = 0; i < n; i++) {
		r = &rs[i];
		gpucheck_describe(r, line, sizeof line);
		printf("%s\n", line);
		if (r->total_mem != 0)
			printf("  memory %.1f GiB total, %.1f GiB free; "
			    "driver %d.%d\n", (double)r->total_mem / (1 << 30),
			    (double)r->free_mem / (1 << 30),
			    r->driver_version / 1000,
			    (r->driver_version % 1000) / 10);
		if (r->n_steps > 0)
			printf("  %-16s %12s\n", "STEP", "TIME");
		for (k = 0; k < r->n_steps && k < GPUCHECK_STEPS_MAX; k++)
			printf("  %-16s %9.3f ms%s\n", r->steps[k].name,
			    (double)r->steps[k].elapsed_us / 1000.0,
			    !r->ok && k + 1 == r->n_steps &&
			    strcmp(r->steps[k].name, r->failed_step) == 0 ?
			    "  FAILED" : "");
		if (r->ok)
			passed++;
	}
	printf("%d of %d device%s passed\n", passed, n, plural(n));
}

static json_t *
result_json(const struct gpucheck_result *r)
{
	json_t		*o, *steps;
	uint32_t	 k;

	steps = json_array();
	for (k = 0; k < r->n_steps && k < GPUCHECK_STEPS_MAX; k++)
		json_array_append_new(steps, json_pack("{s:s, s:I}",
		    "name", r->steps[k].name,
		    "elapsed_us", (json_int_t)r->steps[k].elapsed_us));
	o = json_pack("{s:i, s:b, s:s, s:s, s:I, s:I, s:i, s:I, s:o}",
	    "device", r->device,
	    "ok", r->ok,
	    "name", r->name,
	    "uuid", r->uuid,
	    "total_mem", (json_int_t)r->total_mem,
	    "free_mem", (json_int_t)r->free_mem,
	    "driver_version", r->driver_version,
	    "elapsed_us", (json_int_t)gpucheck_elapsed_us(r),
	    "steps", steps);
	if (!r->ok) {
		json_object_set_new(o, "failed_step",
		    json_string(r->failed_step));
		json_object_set_new(o, "error", json_string(r->error));
	}
	return (o);
}

static void
print_json(const struct gpucheck_result *rs, int n, size_t bytes)
{
	json_t	*doc, *devs;
	int	 i, passed = 0;

	devs = json_array();
	for (i = 0; i < n; i++) {
		json_array_append_new(devs, result_json(&rs[i]));
		if (rs[i].ok)
			passed++;
	}
	doc = json_pack("{s:I, s:i, s:i, s:o}", "bytes", (json_int_t)bytes,
	    "passed", passed, "failed", n - passed, "devices", devs);
	json_dumpf(doc, stdout, JSON_INDENT(2));
	fputc('\n', stdout);
	json_decref(doc);
}

/* What `gpucheck` was asked: the check's options, one device or all. */
struct gpucheck_args {
	struct gpucheck_opts	 opts;
	int			 one;		/* -1: all */
	bool			 json;
};

/*
 * gpucheck's options. True: check as |a| says; false: the command ends
 * now with |*status| (--help, or a bad option named on stderr).
 */
static bool
gpucheck_args(int argc, char **argv, struct gpucheck_args *a, int *status)
{
	static const struct option longopts[] = {
		{ "device", required_argument, NULL, 'd' },
		{ "output", required_argument, NULL, 'o' },
		{ "gpucheck-timeout", required_argument, NULL, 't' },
		/* The older name, for scripts that use it. */
		{ "health-timeout", required_argument, NULL, 't' },
		{ "bytes", required_argument, NULL, 'b' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	uint64_t	 ms;
	const char	*device = "all", *output = "table";
	char		*end;
	int		 ch, idx;

	memset(a, 0, sizeof(*a));
	a->opts.policy = GPUCHECK_STRICT;
	a->opts.timeout_ms = DEFAULT_TIMEOUT_MS;
	a->one = -1;
	*status = 2;
	optind = 1;
	while ((ch = getopt_long(argc, argv, "o:h", longopts, &idx)) != -1) {
		switch (ch) {
		case 'd':
			device = optarg;
			break;
		case 'o':
			output = optarg;
			break;
		case 't':
			if (parse_duration(optarg, 1000, &ms) != 0 ||
			    ms == 0 || ms > UINT32_MAX) {
				fprintf(stderr, "rdzv-agent: gpucheck: "
				    "--%s %s: not a duration such as 30s or "
				    "500ms\n", longopts[idx].name, optarg);
				return false;
			}
			a->opts.timeout_ms = (uint32_t)ms;
			break;
		case 'b':
			if (parse_size(optarg, &a->opts.bytes) != 0 ||
			    a->opts.bytes < 4) {
				fprintf(stderr, "rdzv-agent: gpucheck: "
				    "--bytes %s: not a size such as 256MiB\n",
				    optarg);
				return false;
			}
			break;
		case 'h':
			gpucheck_usage(stdout);
			*status = 0;
			return false;
		default:
			gpucheck_usage(stderr);
			return false;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "rdzv-agent: gpucheck: unexpected argument "
		    "%s\n", argv[optind]);
		gpucheck_usage(stderr);
		return false;
	}
	if (strcmp(output, "table") != 0 && strcmp(output, "json") != 0) {
		fprintf(stderr, "rdzv-agent: gpucheck: -o %s: use table or "
		    "json\n", output);
		return false;
	}
	a->json = strcmp(output, "json") == 0;
	if (strcmp(device, "all") != 0) {
		long v = strtol(device, &end, 10);

		if (*device == '\0' || *end != '\0' || v < 0 || v > 4096) {
			fprintf(stderr, "rdzv-agent: gpucheck: --device %s: "
			    "use a device number or all\n", device);
			return false;
		}
		a->one = (int)v;
	}
	return true;
}

/* Checks the devices |a| names and prints the results: the exit status. */
static int
gpucheck_devices(const struct gpucheck_args *a)
{
	struct gpucheck_result	*rs;
	char			 why[512];
	int			 count, n, i, *devs, passed;

	if (gpucheck_run_count(a->opts.timeout_ms, &count, why,
	    sizeof why) != 0) {
		fprintf(stderr, "rdzv-agent: gpucheck: %s (install the "
		    "NVIDIA driver, or set RDZV_LIBCUDA to the path of its "
		    "libcuda.so.1)\n", why);
		return (1);
	}
	if (count == 0) {
		fprintf(stderr, "rdzv-agent: gpucheck: libcuda found no "
		    "GPU on this node\n");
		return (1);
	}
	if (a->one >= count) {
		fprintf(stderr, "rdzv-agent: gpucheck: --device %d: this "
		    "node has %d GPU%s (0 to %d)\n", a->one, count,
		    plural(count), count - 1);
		return (2);
	}
	n = a->one >= 0 ? 1 : count;
	rs = calloc((size_t)n, sizeof *rs);
	devs = calloc((size_t)n, sizeof *devs);
	if (rs == NULL || devs == NULL) {
		fprintf(stderr, "rdzv-agent: gpucheck: out of memory\n");
		free(rs);
		free(devs);
		return (1);
	}
	for (i = 0; i < n; i++)
		devs[i] = a->one >= 0 ? a->one : i;
	passed = gpucheck_run_devices(&a->opts, devs, n, rs);
	if (a->json)
		print_json(rs, n, gpucheck_bytes(&a->opts));
	else
		print_table(rs, n);
	fflush(stdout);
	free(rs);
	free(devs);
	return (passed == n ? 0 : 1);
}

static int
cmd_gpucheck(int argc, char **argv)
{
	struct gpucheck_args	a;
	int			status;

	if (!gpucheck_args(argc, argv, &a, &status))
		return (status);
	return (gpucheck_devices(&a));
}

const struct cmd_entry cmd_gpucheck_entry = {
	.name = "gpucheck",
	.usage = "gpucheck [--device N|all] [-o json]\n"
	    "        check this node's GPUs by hand",
	.exec = cmd_gpucheck,
	.help = gpucheck_usage,
};

/*
 * `rdzv-agent gpucheck-worker --device N --fd FD [--bytes B]`, not listed:
 * a preloaded worker's check (forksrv.c, python/rdzv/forkserver.py). The
 * worker process runs it before its script, as the exec path runs the
 * check between fork and exec: it writes the result on FD, the worker's
 * exec pipe, and exits 0 when the device passed, GPUCHECK_EXIT when not,
 * 2 on bad usage (then the agent sees no result: the check failed).
 */
int
cmd_gpucheck_worker(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "device", required_argument, NULL, 'd' },
		{ "fd", required_argument, NULL, 'f' },
		{ "bytes", required_argument, NULL, 'b' },
		{ NULL, 0, NULL, 0 }
	};
	struct gpucheck_opts opts;
	long device = -1, fd = -1;
	long long bytes = 0;
	char *end;
	int ch;

	memset(&opts, 0, sizeof opts);
	opts.policy = GPUCHECK_STRICT;
	optind = 1;
	while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (ch) {
		case 'd':
			device = strtol(optarg, &end, 10);
			break;
		case 'f':
			fd = strtol(optarg, &end, 10);
			break;
		case 'b':
			bytes = strtoll(optarg, &end, 10);
			break;
		default:
			end = (char *)"?";
			break;
		}
		if (*end != '\0')
			goto usage;
	}
	if (device < 0 || device > 1024 || fd < 3 || fd > 1 << 20 ||
	    bytes < 0 || optind != argc)
		goto usage;
	opts.bytes = (size_t)bytes;
	return gpucheck_run_worker(&opts, (int)device, (int)fd) == 0 ? 0 :
	    GPUCHECK_EXIT;
usage:
	fprintf(stderr, "rdzv-agent: gpucheck-worker: expected --device N "
	    "--fd FD [--bytes B] (it is run by the agent's fork server)\n");
	return 2;
}
