/*
 * The command line's options: the global ones (where the daemon is, -o) and
 * those of the commands (struct cmd_args), parsed with getopt_long. getopt's
 * own messages are off: they name the program as it was called
 * (build/ofcctl), these say "ofcctl:" and the option.
 */
#include <errno.h>
#include <getopt.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "version.h"

/* How an option's value is kept in struct cmd_args. */
enum kind {
	K_FLAG, /* no value: its bit says it all */
	K_STR,  /* the string itself */
	K_LONG, /* a whole number */
	K_TAG,  /* an entity tag (--if-match) */
};

/* A command's option: its name, its bit, and where its value goes. */
struct opt {
	const char *name;
	char shortopt; /* 0: none */
	uint64_t bit;
	enum kind kind;
	size_t offset; /* in struct cmd_args */
};

#define STR(m) K_STR, offsetof(struct cmd_args, m)
#define NUM(m) K_LONG, offsetof(struct cmd_args, m)

static const struct opt opts[] = {
	{ "wait", 0, OPT_WAIT, STR(wait) },
	{ "servers", 0, OPT_SERVERS, NUM(servers) },
	{ "devices", 0, OPT_DEVICES, NUM(devices) },
	{ "ports-per-device", 0, OPT_PORTS_PER_DEVICE, NUM(ports_per_device) },
	{ "formula", 0, OPT_FORMULA, STR(formula) },
	{ "fabric", 0, OPT_FABRIC, STR(fabric) },
	{ "ocs", 0, OPT_OCS, STR(ocs) },
	{ "limit", 0, OPT_LIMIT, NUM(limit) },
	{ "watch", 'w', OPT_WATCH, K_FLAG, 0 },
	{ "file", 'f', OPT_FILE, STR(file) },
	{ "force", 0, OPT_FORCE, K_FLAG, 0 },
	{ "ignore-not-found", 0, OPT_IGNORE_NOT_FOUND, K_FLAG, 0 },
	{ "if-match", 0, OPT_IF_MATCH, K_TAG, offsetof(struct cmd_args, if_match) },
	{ "since", 0, OPT_SINCE, STR(since) },
	{ "ports", 0, OPT_PORTS, NUM(ports) },
	{ "driver", 0, OPT_DRIVER, STR(driver) },
	{ "endpoint", 0, OPT_ENDPOINT, STR(endpoint) },
	{ "p2p", 0, OPT_P2P, K_FLAG, 0 },
	{ "intra", 0, OPT_INTRA, STR(intra) },
	{ "offload", 0, OPT_OFFLOAD, K_FLAG, 0 },
	{ "switch", 0, OPT_SWITCH, STR(sw) },
	{ "aggregating", 0, OPT_AGGREGATING, K_FLAG, 0 },
	{ "buffer", 0, OPT_BUFFER, NUM(buffer) },
	{ "window", 0, OPT_WINDOW, NUM(window) },
	{ "topology", 0, OPT_TOPOLOGY, STR(topology) },
	{ "shape", 0, OPT_SHAPE, STR(shape) },
	{ "traffic", 0, OPT_TRAFFIC, STR(traffic) },
	{ "activate", 0, OPT_ACTIVATE, K_FLAG, 0 },
	{ "collective", 0, OPT_COLLECTIVE, STR(collective) },
	{ "algorithm", 0, OPT_ALGORITHM, STR(algorithm) },
	{ "in-place", 0, OPT_IN_PLACE, K_FLAG, 0 },
	{ "fit", 0, OPT_FIT, STR(fit) },
	{ "relay", 0, OPT_RELAY, STR(relay) },
	{ "sync", 0, OPT_SYNC, STR(sync) },
	{ "note", 0, OPT_NOTE, STR(note) },
	{ "collected", 0, OPT_COLLECTED, K_FLAG, 0 },
	{ "joined", 0, OPT_JOINED, K_FLAG, 0 },
	{ "consistent", 0, OPT_CONSISTENT, K_FLAG, 0 },
};
#define NOPTS (sizeof(opts) / sizeof(opts[0]))

/* getopt_long's value for the global options without a short form, and for opts[i]: 256 + i. */
enum {
	L_URL = 1000,
	L_TOKEN_FILE,
	L_CACERT,
	L_RETRY,
	L_OPTS = 256,
};

static const struct option global[] = {
	{ "url", required_argument, NULL, L_URL },
	{ "token-file", required_argument, NULL, L_TOKEN_FILE },
	{ "cacert", required_argument, NULL, L_CACERT },
	{ "retry", required_argument, NULL, L_RETRY },
	{ "insecure", no_argument, NULL, 'k' },
	{ "output", required_argument, NULL, 'o' },
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, 'V' },
};
#define NGLOBAL (sizeof(global) / sizeof(global[0]))

const char *cmd_option_name(uint64_t bit)
{
	static char buf[64];
	for (size_t i = 0; i < NOPTS; i++) {
		if (opts[i].bit == bit) {
			snprintf(buf, sizeof(buf), "--%s", opts[i].name);
			return buf;
		}
	}
	return "?";
}

/* A whole number for an option; false when it is not one. */
static bool parse_long(const char *s, long *out)
{
	char *end;
	errno = 0;
	*out = strtol(s, &end, 10);
	return !errno && end != s && *end == '\0';
}

/* --if-match: "*", a tag as the daemon sends it ("3", W/"x"), or a bare revision 3 quoted. */
static int parse_tag(const char *s, char *out)
{
	for (const char *p = s; *p; p++) {
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			return cmd_usage("--if-match takes a tag such as 3 or \"3\", got a control "
			                 "character");
	}
	bool bare = strcmp(s, "*") != 0 && s[0] != '"' && strncmp(s, "W/", 2) != 0;
	int n = snprintf(out, CMD_TAG_LEN, bare ? "\"%s\"" : "%s", s);
	if (!s[0] || n < 0 || n >= CMD_TAG_LEN)
		return cmd_usage("--if-match takes a tag such as 3 or \"3\", got \"%s\"", s);
	return CMD_OK;
}

/* Stores the value of opts[i] into a. */
static int store(const struct opt *o, const char *value, struct cmd_args *a)
{
	char *field = (char *)a + o->offset;
	a->given |= o->bit;
	switch (o->kind) {
	case K_FLAG:
		return CMD_OK;
	case K_STR:
		*(const char **)(void *)field = value;
		return CMD_OK;
	case K_LONG:
		if (!parse_long(value, (long *)(void *)field))
			return cmd_usage("--%s needs a whole number, got \"%s\"", o->name, value);
		return CMD_OK;
	case K_TAG:
		return parse_tag(value, field);
	}
	return CMD_OK;
}

/* getopt's refusal as ofcctl's message: the option as written, from argv. */
static int bad_option(int argc, char **argv, int opt)
{
	const char *word = optind > 0 && optind <= argc ? argv[optind - 1] : "?";
	char shortname[3] = { '-', (char)optopt, '\0' };
	/* A short option inside a group (-wk): argv names the group, optopt the letter. */
	if (optopt && strncmp(word, "--", 2) != 0)
		word = shortname;
	if (opt == ':')
		return cmd_usage("option %s needs a value (ofcctl --help lists the options)", word);
	return cmd_usage("unrecognized option \"%s\" (ofcctl --help lists the options)", word);
}

int cmd_parse_options(int argc, char **argv, struct cmd_ctx *ctx, struct settings_flags *flags,
                      int *first)
{
	struct option longopts[NGLOBAL + NOPTS + 1];
	char shortopts[64] = ":ho:Vk";
	memset(longopts, 0, sizeof(longopts));
	memcpy(longopts, global, sizeof(global));
	for (size_t i = 0; i < NOPTS; i++) {
		longopts[NGLOBAL + i] =
		    (struct option){ opts[i].name,
			             opts[i].kind == K_FLAG ? no_argument : required_argument, NULL,
			             L_OPTS + (int)i };
		if (opts[i].shortopt) {
			size_t l = strlen(shortopts);
			shortopts[l] = opts[i].shortopt;
			shortopts[l + 1] = opts[i].kind == K_FLAG ? '\0' : ':';
			shortopts[l + 2] = '\0';
		}
	}

	opterr = 0;
	int opt, rc;
	while ((opt = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
		const struct opt *o = NULL;
		for (size_t i = 0; i < NOPTS; i++) {
			if (opt == L_OPTS + (int)i || (opts[i].shortopt && opt == opts[i].shortopt))
				o = &opts[i];
		}
		if (o) {
			if ((rc = store(o, optarg, &ctx->args)))
				return rc;
			continue;
		}
		switch (opt) {
		case 'h':
			return CMD_OPTIONS_HELP;
		case 'V':
			printf("ofcctl %s\n", OFCD_VERSION);
			return CMD_OPTIONS_DONE;
		case 'o':
			if (strcmp(optarg, "table") == 0)
				ctx->format = OUT_TABLE;
			else if (strcmp(optarg, "wide") == 0)
				ctx->format = OUT_WIDE;
			else if (strcmp(optarg, "json") == 0)
				ctx->format = OUT_JSON;
			else if (strcmp(optarg, "yaml") == 0)
				ctx->format = OUT_YAML;
			else
				return cmd_usage("-o takes table, wide, json or yaml, got \"%s\"",
				                 optarg);
			break;
		case L_URL:
			flags->url = optarg;
			break;
		case L_TOKEN_FILE:
			flags->token_file = optarg;
			break;
		case L_CACERT:
			flags->cacert = optarg;
			break;
		case L_RETRY:
			flags->retry = optarg;
			break;
		case 'k':
			flags->insecure = true;
			break;
		default:
			return bad_option(argc, argv, opt);
		}
	}
	*first = optind;
	return CMD_OK;
}
