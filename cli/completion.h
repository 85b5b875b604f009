/*
 * The bash completion script, packaging/ofcctl.bash-completion compiled in
 * (build/gen/completion.c, written by cli/embed.sh), so that `ofcctl
 * completion bash` prints the very file that `make install` installs.
 */
#ifndef OFCCTL_COMPLETION_H
#define OFCCTL_COMPLETION_H

/** The script's text, NUL-terminated; static. */
extern const char ofcctl_completion_bash[];

#endif
