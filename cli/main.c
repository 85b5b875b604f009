/*
 * ofcctl, the command-line client of ofcd: parses the command line, finds
 * the command in the table below, resolves where the daemon is
 * (settings.h) and runs the command against it. Exit codes: enum cmd_exit.
 */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "settings.h"
#include "version.h"

/* One command: the words that name it, what follows them, and what runs it. */
struct command {
	const char *words; /* "fabric create" */
	const char *args;  /* its arguments and options, for usage lines */
	int min, max;      /* positional arguments after the words; max -1: no limit */
	unsigned opts;     /* the OPT_* it accepts */
	cmd_fn run;
};

static const struct command commands[] = {
	{ "fabric create", "NAME HOSTLIST... [--wait SECONDS]", 2, -1, OPT_WAIT,
	  cmd_fabric_create },
	{ "fabric delete", "NAME [--wait SECONDS]", 1, 1, OPT_WAIT, cmd_fabric_delete },
	{ "fabric list", "", 0, 0, 0, cmd_fabric_list },
	{ "fabric get", "NAME [--wait SECONDS]", 1, 1, OPT_WAIT, cmd_fabric_get },
	{ "plan", "--servers N --devices D [--ports-per-device P] [--formula auto|1|3]", 0, 0,
	  OPT_SERVERS | OPT_DEVICES | OPT_PORTS | OPT_FORMULA, cmd_plan },
	{ "topology get", "", 0, 0, 0, cmd_topology_get },
	{ "topology put", "FILE|-", 1, 1, 0, cmd_topology_put },
	{ "ocs list", "", 0, 0, 0, cmd_ocs_list },
	{ "ocs get", "NAME", 1, 1, 0, cmd_ocs_get },
	{ "ocs cross-connects", "NAME", 1, 1, 0, cmd_ocs_cross_connects },
	{ "server list", "", 0, 0, 0, cmd_server_list },
	{ "server get", "NAME", 1, 1, 0, cmd_server_get },
	{ "device fail", "SERVER INDEX", 2, 2, 0, cmd_device_fail },
	{ "device ok", "SERVER INDEX", 2, 2, 0, cmd_device_ok },
	{ "operations", "[--fabric NAME] [--ocs NAME] [--limit N]", 0, 0,
	  OPT_FABRIC | OPT_OCS | OPT_LIMIT, cmd_operations },
	{ "events", "[--fabric NAME]", 0, 0, OPT_FABRIC, cmd_events },
	{ "health", "", 0, 0, 0, cmd_health },
};
#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

/* Long options without a short form: values above any character. */
enum {
	L_URL = 256,
	L_TOKEN_FILE,
	L_CACERT,
	L_WAIT,
	L_SERVERS,
	L_DEVICES,
	L_PORTS,
	L_FORMULA,
	L_FABRIC,
	L_OCS,
	L_LIMIT,
};

static const struct option long_options[] = {
	{ "url", required_argument, NULL, L_URL },
	{ "token-file", required_argument, NULL, L_TOKEN_FILE },
	{ "cacert", required_argument, NULL, L_CACERT },
	{ "insecure", no_argument, NULL, 'k' },
	{ "output", required_argument, NULL, 'o' },
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, 'V' },
	{ "wait", required_argument, NULL, L_WAIT },
	{ "servers", required_argument, NULL, L_SERVERS },
	{ "devices", required_argument, NULL, L_DEVICES },
	{ "ports-per-device", required_argument, NULL, L_PORTS },
	{ "formula", required_argument, NULL, L_FORMULA },
	{ "fabric", required_argument, NULL, L_FABRIC },
	{ "ocs", required_argument, NULL, L_OCS },
	{ "limit", required_argument, NULL, L_LIMIT },
	{ NULL, 0, NULL, 0 },
};

/* The option names of the OPT_* bits, in bit order, for messages. */
static const char *const opt_names[] = { "--wait",    "--servers",
	                                 "--devices", "--ports-per-device",
	                                 "--formula", "--fabric",
	                                 "--ocs",     "--limit" };

static void print_usage(FILE *f)
{
	fprintf(f, "usage: ofcctl [--url URL] [--token-file FILE] [--cacert FILE] [-k|--insecure]\n"
	           "              [-o table|json] COMMAND\n\n"
	           "commands:\n");
	for (size_t i = 0; i < NCOMMANDS; i++)
		fprintf(f, "  %s%s%s\n", commands[i].words, commands[i].args[0] ? " " : "",
		        commands[i].args);
	fprintf(f,
	        "\nHOSTLIST: names or Slurm host lists such as srv[0-4,7],gpu[01-03].\n"
	        "The daemon is --url, else $OFCCTL_URL, else url in ~/.config/ofcctl.ini or\n"
	        "%s, else %s. An https daemon's certificate is checked against\n"
	        "--cacert, else $OFCCTL_CACERT, $CURL_CA_BUNDLE, $SSL_CERT_FILE, cacert in the\n"
	        "files, else the system's CAs; --insecure checks nothing.\n"
	        "Exit codes: 0 done, 1 refused by the daemon,\n"
	        "2 usage, 3 --wait ended before the state asked for, 4 daemon unreachable or 5xx.\n"
	        "See ofcctl(1).\n",
	        OFCCTL_SYSTEM_INI, SETTINGS_DEFAULT_URL);
}

static void print_command_usage(const struct command *cmd)
{
	fprintf(stderr, "usage: ofcctl %s%s%s\n", cmd->words, cmd->args[0] ? " " : "", cmd->args);
}

/* A whole number for an option; false when it is not one. */
static bool parse_long(const char *s, long *out)
{
	char *end;
	errno = 0;
	*out = strtol(s, &end, 10);
	return !errno && end != s && *end == '\0';
}

/* How many words of argv name a command: 1 or 2, or 0 when none does. */
static size_t match(const struct command *cmd, int argc, char **argv)
{
	size_t len = strcspn(cmd->words, " ");
	if (argc < 1 || strlen(argv[0]) != len || strncmp(argv[0], cmd->words, len) != 0)
		return 0;
	if (!cmd->words[len])
		return 1;
	return argc >= 2 && strcmp(argv[1], cmd->words + len + 1) == 0 ? 2 : 0;
}

/* The command argv names; after a message listing the group's commands, NULL. */
static const struct command *find_command(int argc, char **argv, size_t *nwords)
{
	bool group = false;
	for (size_t i = 0; i < NCOMMANDS; i++) {
		if ((*nwords = match(&commands[i], argc, argv)))
			return &commands[i];
		group |= strncmp(argv[0], commands[i].words, strlen(argv[0])) == 0 &&
		         commands[i].words[strlen(argv[0])] == ' ';
	}
	if (!group) {
		cmd_usage("unknown command \"%s\" (ofcctl --help lists them)", argv[0]);
		return NULL;
	}
	cmd_usage(argc > 1 ? "unknown command \"%s %s\"" : "\"%s\" needs a command:", argv[0],
	          argc > 1 ? argv[1] : "");
	for (size_t i = 0; i < NCOMMANDS; i++) {
		if (strncmp(argv[0], commands[i].words, strlen(argv[0])) == 0 &&
		    commands[i].words[strlen(argv[0])] == ' ')
			print_command_usage(&commands[i]);
	}
	return NULL;
}

/* Checks the arguments and options against the command's own. */
static int check_args(const struct command *cmd, const struct cmd_args *a)
{
	if (a->argc < cmd->min || (cmd->max >= 0 && a->argc > cmd->max))
		return cmd_usage(cmd->max == 0 ? "%s takes no arguments"
		                               : "%s: wrong number of arguments",
		                 cmd->words);
	for (size_t b = 0; b < sizeof(opt_names) / sizeof(opt_names[0]); b++) {
		if ((a->given & ~cmd->opts) & (1u << b))
			return cmd_usage("%s does not take %s", cmd->words, opt_names[b]);
	}
	return CMD_OK;
}

/* Connects to the daemon the settings name and runs the command. */
static int run(const struct command *cmd, struct cmd_ctx *ctx, const struct settings_flags *flags)
{
	struct settings s;
	char err[1024], *token = NULL;
	if (settings_resolve(&s, flags, err, sizeof(err)))
		return cmd_fail(CMD_USAGE, "%s", err);
	if (s.token_file[0] && settings_read_token(s.token_file, &token, err, sizeof(err)))
		return cmd_fail(CMD_USAGE, "%s", err);
	struct client_tls tls = { .cacert = s.cacert, .insecure = s.insecure };
	ctx->client = client_new(s.url, token, &tls, err, sizeof(err));
	if (token) {
		explicit_bzero(token, strlen(token));
		free(token);
	}
	if (!ctx->client)
		return cmd_fail(CMD_UNREACHABLE, "%s", err);
	int rc = cmd->run(ctx);
	client_free(ctx->client);
	if (rc == CMD_USAGE)
		print_command_usage(cmd);
	return rc;
}

int main(int argc, char **argv)
{
	struct cmd_ctx ctx = { .format = OUT_TABLE };
	struct cmd_args *a = &ctx.args;
	struct settings_flags flags = { 0 };
	bool num_ok = true;
	int opt, li = 0;

	while ((opt = getopt_long(argc, argv, "ho:Vk", long_options, &li)) != -1) {
		switch (opt) {
		case 'h':
			print_usage(stdout);
			return CMD_OK;
		case 'V':
			printf("ofcctl %s\n", OFCD_VERSION);
			return CMD_OK;
		case 'o':
			if (strcmp(optarg, "table") == 0)
				ctx.format = OUT_TABLE;
			else if (strcmp(optarg, "json") == 0)
				ctx.format = OUT_JSON;
			else
				return cmd_usage("-o takes table or json, got \"%s\"", optarg);
			break;
		case L_URL:
			flags.url = optarg;
			break;
		case L_TOKEN_FILE:
			flags.token_file = optarg;
			break;
		case L_CACERT:
			flags.cacert = optarg;
			break;
		case 'k':
			flags.insecure = true;
			break;
		case L_WAIT:
			a->wait = optarg;
			a->given |= OPT_WAIT;
			break;
		case L_SERVERS:
			num_ok &= parse_long(optarg, &a->servers);
			a->given |= OPT_SERVERS;
			break;
		case L_DEVICES:
			num_ok &= parse_long(optarg, &a->devices);
			a->given |= OPT_DEVICES;
			break;
		case L_PORTS:
			num_ok &= parse_long(optarg, &a->ports);
			a->given |= OPT_PORTS;
			break;
		case L_FORMULA:
			a->formula = optarg;
			a->given |= OPT_FORMULA;
			break;
		case L_FABRIC:
			a->fabric = optarg;
			a->given |= OPT_FABRIC;
			break;
		case L_OCS:
			a->ocs = optarg;
			a->given |= OPT_OCS;
			break;
		case L_LIMIT:
			num_ok &= parse_long(optarg, &a->limit);
			a->given |= OPT_LIMIT;
			break;
		default: /* getopt said what was wrong */
			fprintf(stderr, "ofcctl --help lists the commands and options\n");
			return CMD_USAGE;
		}
		if (!num_ok)
			return cmd_usage("--%s needs a whole number, got \"%s\"",
			                 long_options[li].name, optarg);
	}
	if (optind >= argc) {
		print_usage(stderr);
		return CMD_USAGE;
	}

	size_t nwords;
	const struct command *cmd = find_command(argc - optind, argv + optind, &nwords);
	if (!cmd)
		return CMD_USAGE;
	a->argc = argc - optind - (int)nwords;
	a->argv = argv + optind + nwords;
	if (check_args(cmd, a)) {
		print_command_usage(cmd);
		return CMD_USAGE;
	}
	return run(cmd, &ctx, &flags);
}
