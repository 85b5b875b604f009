/*
 * ofcctl, the command-line client of ofcd: parses the command line, finds
 * the command in the table below, resolves where the daemon is
 * (settings.h) and runs the command against it. Exit codes: enum cmd_exit.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "secret_file.h"
#include "settings.h"

/* One command: the words that name it, what follows them, and what runs it. */
struct command {
	const char *words; /* "fabric create" */
	const char *args;  /* its arguments and options, for usage lines */
	int min, max;      /* positional arguments after the words; max -1: no limit */
	uint64_t opts;     /* the OPT_* it accepts, and LOCAL */
	cmd_fn run;
};

/* In opts, beside the options: the command needs no daemon (nor settings to find one). */
#define LOCAL CMD_OPT(63)

#define DELETE_OPTS (OPT_IF_MATCH | OPT_IGNORE_NOT_FOUND)
/* A fabric's layout: a full mesh, or a grid for more servers than one joins. */
#define LAYOUT_OPTS (OPT_TOPOLOGY | OPT_SHAPE | OPT_TRAFFIC)
/* A calibration's own options (besides OPT_NCCL_TESTS, for a file of nccl-tests output). */
#define COST_FIT_OPTS                                                                              \
	(OPT_ACTIVATE | OPT_FIT | OPT_RELAY | OPT_SYNC | OPT_NOTE | OPT_FABRIC | OPT_COLLECTED)

static const struct command commands[] = {
	{ "fabric create",
	  "NAME HOSTLIST... [--topology auto|full-mesh|hyperx|torus] [--shape AxB...]\n"
	  "                [--traffic allreduce|alltoall|mixed] [--wait SECONDS]",
	  2, -1, OPT_WAIT | LAYOUT_OPTS, cmd_fabric_create },
	{ "fabric delete", "NAME [--wait SECONDS] [--if-match REV] [--ignore-not-found]", 1, 1,
	  OPT_WAIT | DELETE_OPTS, cmd_fabric_delete },
	{ "fabric list", "[--consistent | -w]", 0, 0, OPT_CONSISTENT | OPT_WATCH, cmd_fabric_list },
	{ "fabric get", "NAME [--wait SECONDS] [--consistent | -w]", 1, 1,
	  OPT_WAIT | OPT_CONSISTENT | OPT_WATCH, cmd_fabric_get },
	{ "plan",
	  "--servers N --devices D [--ports-per-device P] [--formula auto|1|3]\n"
	  "       [--topology auto|full-mesh|hyperx|torus] [--shape AxB...]\n"
	  "       [--traffic allreduce|alltoall|mixed]",
	  0, 0, OPT_SERVERS | OPT_DEVICES | OPT_PORTS_PER_DEVICE | OPT_FORMULA | LAYOUT_OPTS,
	  cmd_plan },
	{ "apply", "FILE|-", 1, 1, 0, cmd_apply },
	{ "topology get", "", 0, 0, 0, cmd_topology_get },
	{ "topology put", "FILE|- [--if-match TAG | --force]", 1, 1, OPT_IF_MATCH | OPT_FORCE,
	  cmd_topology_put },
	{ "wiring get", "", 0, 0, 0, cmd_wiring_get },
	{ "wiring put", "FILE|- [--if-match TAG | --force]", 1, 1, OPT_IF_MATCH | OPT_FORCE,
	  cmd_wiring_put },
	{ "ocs list", "[-w]", 0, 0, OPT_WATCH, cmd_ocs_list },
	{ "ocs get", "NAME [-w]", 1, 1, OPT_WATCH, cmd_ocs_get },
	{ "ocs create", "NAME [--ports N] [--driver DRIVER] [--endpoint ADDRESS] [-f FILE|-]", 1, 1,
	  OPT_PORTS | OPT_DRIVER | OPT_ENDPOINT | OPT_FILE, cmd_ocs_create },
	{ "ocs delete", "NAME [--force] [--if-match REV] [--ignore-not-found]", 1, 1,
	  OPT_FORCE | DELETE_OPTS, cmd_ocs_delete },
	{ "ocs cross-connects", "NAME", 1, 1, 0, cmd_ocs_cross_connects },
	{ "server list", "[--joined | -w]", 0, 0, OPT_JOINED | OPT_WATCH, cmd_server_list },
	{ "server get", "NAME [--wait SECONDS] [-w]", 1, 1, OPT_WAIT | OPT_WATCH, cmd_server_get },
	{ "server create",
	  "NAME [--devices N] [--ports-per-device P] [--p2p] [--intra full-mesh|two-groups]\n"
	  "                [--offload] [--switch NAME] [-f FILE|-]",
	  1, 1,
	  OPT_DEVICES | OPT_PORTS_PER_DEVICE | OPT_P2P | OPT_INTRA | OPT_OFFLOAD | OPT_SWITCH |
	      OPT_FILE,
	  cmd_server_create },
	{ "server delete", "NAME [--if-match REV] [--ignore-not-found]", 1, 1, DELETE_OPTS,
	  cmd_server_delete },
	{ "switch list", "", 0, 0, 0, cmd_switch_list },
	{ "switch get", "NAME", 1, 1, 0, cmd_switch_get },
	{ "switch create", "NAME [--aggregating --buffer B --window W] [--offload] [-f FILE|-]", 1,
	  1, OPT_AGGREGATING | OPT_BUFFER | OPT_WINDOW | OPT_OFFLOAD | OPT_FILE,
	  cmd_switch_create },
	{ "switch delete", "NAME [--if-match REV] [--ignore-not-found]", 1, 1, DELETE_OPTS,
	  cmd_switch_delete },
	{ "device fail", "SERVER INDEX", 2, 2, 0, cmd_device_fail },
	{ "device ok", "SERVER INDEX", 2, 2, 0, cmd_device_ok },
	{ "operations", "[--fabric NAME] [--ocs NAME] [--limit N]", 0, 0,
	  OPT_FABRIC | OPT_OCS | OPT_LIMIT, cmd_operations },
	{ "events", "[--fabric NAME]", 0, 0, OPT_FABRIC, cmd_events },
	{ "audit", "[--since ID|TIME] [--limit N]", 0, 0, OPT_SINCE | OPT_LIMIT, cmd_audit },
	{ "cost calibrate",
	  "NAME [FILE|-] [--collected] [--activate] [--fit TERM,TERM...] [--relay MODE]\n"
	  "                [--sync MODE] [--note TEXT] [--fabric NAME]\n"
	  "                [--collective C --algorithm A --servers N --devices D [--in-place]]",
	  1, 2, COST_FIT_OPTS | OPT_NCCL_TESTS, cmd_cost_calibrate },
	{ "cost runs delete", "[--fabric NAME]", 0, 0, OPT_FABRIC, cmd_cost_runs_delete },
	{ "cost runs", "[--fabric NAME] [--limit N]", 0, 0, OPT_FABRIC | OPT_LIMIT, cmd_cost_runs },
	{ "cost params", "[NAME]", 0, 1, 0, cmd_cost_params },
	{ "cost activate", "NAME|none", 1, 1, 0, cmd_cost_activate },
	{ "cost delete", "NAME [--ignore-not-found]", 1, 1, OPT_IGNORE_NOT_FOUND, cmd_cost_delete },
	{ "cluster status", "", 0, 0, 0, cmd_cluster_status },
	{ "cluster members", "", 0, 0, 0, cmd_cluster_members },
	{ "cluster snapshot save", "FILE", 1, 1, 0, cmd_cluster_snapshot_save },
	{ "health", "", 0, 0, 0, cmd_health },
	{ "version", "", 0, 0, 0, cmd_version },
	{ "completion", "bash", 1, 1, LOCAL, cmd_completion },
};
#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

static void print_usage(FILE *f)
{
	fprintf(
	    f, "usage: ofcctl [--url URL[,URL...]] [--retry SECONDS] [--token-file FILE]\n"
	       "              [--cacert FILE] [-k|--insecure] [-o table|wide|json|yaml] COMMAND\n\n"
	       "commands:\n");
	for (size_t i = 0; i < NCOMMANDS; i++)
		fprintf(f, "  %s%s%s\n", commands[i].words, commands[i].args[0] ? " " : "",
		        commands[i].args);
	fprintf(f,
	        "\nHOSTLIST: names or Slurm host lists such as srv[0-4,7],gpu[01-03].\n"
	        "--topology: auto (the default: a full mesh where it fits, else the best grid;\n"
	        "for --traffic, the fastest), full-mesh, or a HyperX or torus grid; --shape\n"
	        "32x32: that grid (a HyperX unless --topology torus), its sizes' product the\n"
	        "number of servers.\n"
	        "-w, --watch: print the answer again whenever it changes, until Ctrl-C.\n"
	        "-f FILE: the JSON body to send, its members overridden by the options given.\n"
	        "cost calibrate: FILE is JSON (a request body, or an array of runs) or else\n"
	        "the output of an nccl-tests binary, whose runs the --collective, --algorithm,\n"
	        "--servers and --devices given describe (or its \"# ofcd: ...\" line);\n"
	        "--collected: the runs servers' agents sent too (cost runs);\n"
	        "cost activate none: no set active.\n"
	        "The daemon is --url, else $OFCCTL_URL, else url in ~/.config/ofcctl.ini or\n"
	        "%s, else %s; a cluster's members may be listed, comma-separated:\n"
	        "a request none of them took (unreachable, 503 no leader) goes to the next,\n"
	        "and round again for --retry seconds ($OFCCTL_RETRY, retry in the files; 0).\n"
	        "An https daemon's certificate is checked against\n"
	        "--cacert, else $OFCCTL_CACERT, $CURL_CA_BUNDLE, $SSL_CERT_FILE, cacert in the\n"
	        "files, else the system's CAs; --insecure checks nothing.\n"
	        "Exit codes: 0 done, 1 refused by the daemon (412: --if-match or the version\n"
	        "read is not the current one), 2 usage, 3 --wait ended before the state asked\n"
	        "for, 4 daemon unreachable or 5xx.\n"
	        "See ofcctl(1).\n",
	        OFCCTL_SYSTEM_INI, SETTINGS_DEFAULT_URL);
}

static void print_command_usage(const struct command *cmd)
{
	fprintf(stderr, "usage: ofcctl %s%s%s\n", cmd->words, cmd->args[0] ? " " : "", cmd->args);
}

/* How many words of argv name the command (all of its words), or 0. */
static size_t match(const struct command *cmd, int argc, char **argv)
{
	const char *w = cmd->words;
	size_t n = 0;
	while (*w) {
		size_t len = strcspn(w, " ");
		if ((int)n >= argc || strlen(argv[n]) != len || strncmp(argv[n], w, len) != 0)
			return 0;
		n++;
		w += len + (w[len] == ' ');
	}
	return n;
}

/* True when the command's words begin with the group word followed by more. */
static bool in_group(const struct command *cmd, const char *group)
{
	size_t len = strlen(group);
	return strncmp(cmd->words, group, len) == 0 && cmd->words[len] == ' ';
}

/* The command argv names; after a message listing the group's commands, NULL. */
static const struct command *find_command(int argc, char **argv, size_t *nwords)
{
	bool group = false;
	for (size_t i = 0; i < NCOMMANDS; i++) {
		if ((*nwords = match(&commands[i], argc, argv)))
			return &commands[i];
		group |= in_group(&commands[i], argv[0]);
	}
	if (!group) {
		cmd_usage("unknown command \"%s\" (ofcctl --help lists them)", argv[0]);
		return NULL;
	}
	cmd_usage(argc > 1 ? "unknown command \"%s %s\"" : "\"%s\" needs a command:", argv[0],
	          argc > 1 ? argv[1] : "");
	for (size_t i = 0; i < NCOMMANDS; i++) {
		if (in_group(&commands[i], argv[0]))
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
	for (uint64_t bit = 1; bit; bit <<= 1) {
		if (a->given & ~cmd->opts & bit)
			return cmd_usage("%s does not take %s", cmd->words, cmd_option_name(bit));
	}
	return CMD_OK;
}

/* Connects to the daemon the settings name and runs the command. */
static int run(const struct command *cmd, struct cmd_ctx *ctx, const struct settings_flags *flags)
{
	struct settings s;
	char err[1024], *token = NULL;
	int rc;
	if (cmd->opts & LOCAL) {
		rc = cmd->run(ctx);
		goto out;
	}
	if (settings_resolve(&s, flags, err, sizeof(err)))
		return cmd_fail(CMD_USAGE, "%s", err);
	if (s.token_file[0] && settings_read_token(s.token_file, &token, err, sizeof(err)))
		return cmd_fail(CMD_USAGE, "%s", err);
	char warning[2 * sizeof(s.token_file) + 128];
	if (s.token_file[0] &&
	    secret_file_exposed(s.token_file, "a bearer token", warning, sizeof(warning)))
		fprintf(stderr, "ofcctl: warning: %s\n", warning);
	struct client_tls tls = { .cacert = s.cacert, .insecure = s.insecure };
	ctx->client = client_new(s.url, token, &tls, err, sizeof(err));
	if (token) {
		explicit_bzero(token, strlen(token));
		free(token);
	}
	if (!ctx->client)
		return cmd_fail(CMD_UNREACHABLE, "%s", err);
	client_set_retry(ctx->client, s.retry_s);
	rc = cmd->run(ctx);
	client_free(ctx->client);
out:
	if (rc == CMD_USAGE)
		print_command_usage(cmd);
	return rc;
}

int main(int argc, char **argv)
{
	struct cmd_ctx ctx = { .format = OUT_TABLE };
	struct cmd_args *a = &ctx.args;
	struct settings_flags flags = { 0 };
	int first;

	int rc = cmd_parse_options(argc, argv, &ctx, &flags, &first);
	if (rc == CMD_OPTIONS_HELP)
		print_usage(stdout);
	if (rc < 0)
		return CMD_OK;
	if (rc)
		return rc;
	if (first >= argc) {
		print_usage(stderr);
		return CMD_USAGE;
	}

	size_t nwords;
	const struct command *cmd = find_command(argc - first, argv + first, &nwords);
	if (!cmd)
		return CMD_USAGE;
	a->argc = argc - first - (int)nwords;
	a->argv = argv + first + nwords;
	if (check_args(cmd, a)) {
		print_command_usage(cmd);
		return CMD_USAGE;
	}
	return run(cmd, &ctx, &flags);
}
