/*
 * The stand-in libcuda's environment: FAKECUDA_DEVICES, FAKECUDA_FAIL,
 * FAKECUDA_MISMATCH, FAKECUDA_DEAD_SM, FAKECUDA_HANG, FAKECUDA_CRASH,
 * FAKECUDA_MEM, FAKECUDA_SMS, FAKECUDA_DRIVER_VERSION, FAKECUDA_STATE, FAKECUDA_LOG, and
 * CUDA_VISIBLE_DEVICES applied as the real driver applies it (README.md).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fakecuda.h"

static const struct {
	int		 code;
	const char	*name;
} errors[] = {
	{ 0, "CUDA_SUCCESS" },
	{ 1, "CUDA_ERROR_INVALID_VALUE" },
	{ 2, "CUDA_ERROR_OUT_OF_MEMORY" },
	{ 3, "CUDA_ERROR_NOT_INITIALIZED" },
	{ 4, "CUDA_ERROR_DEINITIALIZED" },
	{ 34, "CUDA_ERROR_STUB_LIBRARY" },
	{ 46, "CUDA_ERROR_DEVICE_UNAVAILABLE" },
	{ 100, "CUDA_ERROR_NO_DEVICE" },
	{ 101, "CUDA_ERROR_INVALID_DEVICE" },
	{ 102, "CUDA_ERROR_DEVICE_NOT_LICENSED" },
	{ 200, "CUDA_ERROR_INVALID_IMAGE" },
	{ 201, "CUDA_ERROR_INVALID_CONTEXT" },
	{ 209, "CUDA_ERROR_NO_BINARY_FOR_GPU" },
	{ 214, "CUDA_ERROR_ECC_UNCORRECTABLE" },
	{ 218, "CUDA_ERROR_INVALID_PTX" },
	{ 220, "CUDA_ERROR_NVLINK_UNCORRECTABLE" },
	{ 222, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION" },
	{ 304, "CUDA_ERROR_OPERATING_SYSTEM" },
	{ 400, "CUDA_ERROR_INVALID_HANDLE" },
	{ 500, "CUDA_ERROR_NOT_FOUND" },
	{ 700, "CUDA_ERROR_ILLEGAL_ADDRESS" },
	{ 701, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES" },
	{ 702, "CUDA_ERROR_LAUNCH_TIMEOUT" },
	{ 714, "CUDA_ERROR_HARDWARE_STACK_ERROR" },
	{ 715, "CUDA_ERROR_ILLEGAL_INSTRUCTION" },
	{ 719, "CUDA_ERROR_LAUNCH_FAILED" },
	{ 801, "CUDA_ERROR_NOT_SUPPORTED" },
	{ 802, "CUDA_ERROR_SYSTEM_NOT_READY" },
	{ 803, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH" },
	{ 999, "CUDA_ERROR_UNKNOWN" },
};

/* The step names of lib/gpucheck/gpucheck.c a fault may name. */
static const char *steps[] = {
	"cuInit", "driver_version", "device_count", "device_get", "name",
	"uuid", "total_mem", "sm_count", "primary_ctx", "free_mem", "alloc",
	"module_load", "fill", "kernel", "copy_in", "copy_back", "verify",
	"free", "module_unload", "release",
};

const char *
fake_error_name(int code)
{
	size_t	i;

	for (i = 0; i < sizeof errors / sizeof errors[0]; i++)
		if (errors[i].code == code)
			return (errors[i].name);
	return (NULL);
}

int
fake_error_parse(const char *s, int *code)
{
	size_t	 i;
	char	*end;
	long	 v;

	for (i = 0; i < sizeof errors / sizeof errors[0]; i++) {
		if (strcmp(errors[i].name, s) == 0) {
			*code = errors[i].code;
			return (0);
		}
	}
	v = strtol(s, &end, 10);
	if (*s == '\0' || *end != '\0' || v <= 0 || v > 100000)
		return (-1);
	*code = (int)v;
	return (0);
}

void
fake_uuid(int d, unsigned char out[16])
{
	static const unsigned char base[16] = { 0xfa, 0x4e, 0xc0, 0xda,
	    0x00, 0x00, 0x40, 0x00, 0x80, 0x00, 0, 0, 0, 0, 0, 0 };

	memcpy(out, base, 16);
	out[14] = (unsigned char)(d >> 8);
	out[15] = (unsigned char)d;
}

static int
bad(const char *var, const char *val, const char *why)
{
	fprintf(stderr, "fakecuda: %s=%s: %s\n", var, val, why);
	return (-1);
}

static int
parse_uint(const char *s, unsigned long long max, unsigned long long *out)
{
	char	*end;

	errno = 0;
	*out = strtoull(s, &end, 10);
	if (*s == '\0' || *end != '\0' || errno != 0 || *out > max ||
	    *s == '-')
		return (-1);
	return (0);
}

static int
known_step(const char *s)
{
	size_t	i;

	for (i = 0; i < sizeof steps / sizeof steps[0]; i++)
		if (strcmp(steps[i], s) == 0)
			return (1);
	return (0);
}

/*
 * One entry of a fault list: DEV[:FIELD...][:after=N]. FAIL takes
 * STEP:ERROR, MISMATCH an optional ELEMENT, DEAD_SM an optional SM, HANG
 * an optional STEP.
 */
static int
parse_fault(const char *var, char *entry, enum fault_kind kind,
    struct fault *f)
{
	char			*field[5], *p, *save = NULL;
	int			 n = 0;
	unsigned long long	 v;

	memset(f, 0, sizeof *f);
	f->kind = kind;
	for (p = strtok_r(entry, ":", &save); p != NULL;
	    p = strtok_r(NULL, ":", &save)) {
		if (n == 5)
			return (bad(var, entry, "too many fields"));
		field[n++] = p;
	}
	if (n > 0 && strncmp(field[n - 1], "after=", 6) == 0) {
		if (parse_uint(field[n - 1] + 6, 1000000, &v) != 0)
			return (bad(var, field[n - 1], "after=N: not a count"));
		f->after = (unsigned)v;
		n--;
	}
	if (n == 0)
		return (bad(var, entry, "no device"));
	if (strcmp(field[0], "*") == 0)
		f->device = -1;
	else if (parse_uint(field[0], FAKE_DEVICES_MAX - 1, &v) == 0)
		f->device = (int)v;
	else
		return (bad(var, field[0], "not a device number or *"));

	switch (kind) {
	case FAULT_FAIL:
		if (n != 3)
			return (bad(var, field[0], "use DEV:STEP:ERROR"));
		if (fake_error_parse(field[2], &f->error) != 0)
			return (bad(var, field[2], "unknown CUDA error"));
		snprintf(f->step, sizeof f->step, "%s", field[1]);
		break;
	case FAULT_MISMATCH:
		if (n > 2)
			return (bad(var, field[0], "use DEV[:ELEMENT]"));
		f->element = 17;
		if (n == 2 && parse_uint(field[1], UINT64_MAX, &v) != 0)
			return (bad(var, field[1], "not an element index"));
		if (n == 2)
			f->element = v;
		snprintf(f->step, sizeof f->step, "kernel");
		break;
	case FAULT_DEAD_SM:
		if (n > 2 || (n == 2 && parse_uint(field[1], 1023, &v) != 0))
			return (bad(var, field[0], "use DEV[:SM], SM < 1024"));
		f->element = n == 2 ? v : 0;
		snprintf(f->step, sizeof f->step, "kernel");
		break;
	case FAULT_HANG:
	case FAULT_CRASH:
		if (n > 2)
			return (bad(var, field[0], "use DEV[:STEP]"));
		snprintf(f->step, sizeof f->step, "%s",
		    n == 2 ? field[1] : "kernel");
		break;
	}
	if (!known_step(f->step))
		return (bad(var, f->step, "not a step of the check"));
	return (0);
}

static int
parse_faults(struct fake_config *cfg, const char *var, enum fault_kind kind)
{
	const char	*val = getenv(var);
	char		*copy, *entry, *save = NULL;
	int		 rc = 0;

	if (val == NULL || *val == '\0')
		return (0);
	if ((copy = strdup(val)) == NULL)
		return (bad(var, val, "out of memory"));
	for (entry = strtok_r(copy, ",", &save); entry != NULL;
	    entry = strtok_r(NULL, ",", &save)) {
		if (cfg->n_faults == FAKE_FAULTS_MAX) {
			rc = bad(var, val, "too many entries");
			break;
		}
		if (parse_fault(var, entry, kind,
		    &cfg->faults[cfg->n_faults]) != 0) {
			rc = -1;
			break;
		}
		cfg->n_faults++;
	}
	free(copy);
	return (rc);
}

/* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", as the driver prints it. */
static void
uuid_string(int d, char *buf, size_t len)
{
	unsigned char	u[16];

	fake_uuid(d, u);
	snprintf(buf, len, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-"
	    "%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1], u[2], u[3],
	    u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
	    u[14], u[15]);
}

/*
 * CUDA_VISIBLE_DEVICES as the driver reads it: indices or UUIDs (a
 * unique prefix of "GPU-..." is enough), and the list ends at the first
 * entry that names no device. Unset: every device.
 */
static void
parse_visible(struct fake_config *cfg)
{
	const char		*val = getenv("CUDA_VISIBLE_DEVICES");
	char			*copy, *e, *save = NULL, uuid[48];
	unsigned long long	 v;
	int			 d, match, found, i;

	cfg->n_visible = 0;
	if (val == NULL) {
		for (d = 0; d < cfg->devices; d++)
			cfg->visible[cfg->n_visible++] = d;
		return;
	}
	if ((copy = strdup(val)) == NULL)
		return;
	for (e = strtok_r(copy, ",", &save); e != NULL;
	    e = strtok_r(NULL, ",", &save)) {
		while (*e == ' ')
			e++;
		found = -1;
		if (parse_uint(e, FAKE_DEVICES_MAX, &v) == 0) {
			if ((int)v < cfg->devices)
				found = (int)v;
		} else if (strncmp(e, "GPU-", 4) == 0) {
			for (d = 0, match = 0; d < cfg->devices; d++) {
				uuid_string(d, uuid, sizeof uuid);
				if (strncmp(uuid, e, strlen(e)) == 0) {
					found = d;
					match++;
				}
			}
			if (match != 1)
				found = -1;
		}
		for (i = 0; found >= 0 && i < cfg->n_visible; i++)
			if (cfg->visible[i] == found)
				found = -1;	/* a repeat ends the list */
		if (found < 0)
			break;
		cfg->visible[cfg->n_visible++] = found;
	}
	free(copy);
}

int
fake_config_read(struct fake_config *cfg)
{
	const char		*s;
	unsigned long long	 v;

	memset(cfg, 0, sizeof *cfg);
	cfg->devices = 1;
	cfg->driver_version = 12080;
	cfg->mem = 80ull << 30;
	cfg->sms = 4;
	if ((s = getenv("FAKECUDA_DEVICES")) != NULL && *s != '\0') {
		if (parse_uint(s, FAKE_DEVICES_MAX, &v) != 0)
			return (bad("FAKECUDA_DEVICES", s, "not 0 to 64"));
		cfg->devices = (int)v;
	}
	if ((s = getenv("FAKECUDA_DRIVER_VERSION")) != NULL && *s != '\0') {
		if (parse_uint(s, 1000000, &v) != 0)
			return (bad("FAKECUDA_DRIVER_VERSION", s,
			    "not a number such as 12080"));
		cfg->driver_version = (int)v;
	}
	if ((s = getenv("FAKECUDA_MEM")) != NULL && *s != '\0') {
		if (parse_uint(s, UINT64_MAX, &v) != 0 || v == 0)
			return (bad("FAKECUDA_MEM", s, "not a size in bytes"));
		cfg->mem = v;
	}
	if ((s = getenv("FAKECUDA_SMS")) != NULL && *s != '\0') {
		if (parse_uint(s, 1024, &v) != 0 || v == 0)
			return (bad("FAKECUDA_SMS", s, "not 1 to 1024"));
		cfg->sms = (int)v;
	}
	cfg->state_dir = getenv("FAKECUDA_STATE");
	if (cfg->state_dir != NULL && *cfg->state_dir == '\0')
		cfg->state_dir = NULL;
	cfg->log_path = getenv("FAKECUDA_LOG");
	if (cfg->log_path != NULL && *cfg->log_path == '\0')
		cfg->log_path = NULL;
	if (parse_faults(cfg, "FAKECUDA_FAIL", FAULT_FAIL) != 0 ||
	    parse_faults(cfg, "FAKECUDA_MISMATCH", FAULT_MISMATCH) != 0 ||
	    parse_faults(cfg, "FAKECUDA_DEAD_SM", FAULT_DEAD_SM) != 0 ||
	    parse_faults(cfg, "FAKECUDA_HANG", FAULT_HANG) != 0 ||
	    parse_faults(cfg, "FAKECUDA_CRASH", FAULT_CRASH) != 0)
		return (-1);
	parse_visible(cfg);
	return (0);
}
