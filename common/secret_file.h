/*
 * Whether a file that holds a secret (a bearer token, a configuration with
 * tokens) can be read by any user of the machine: ofcd, its agent and ofcctl
 * warn (they do not refuse, as ssh does a private key: setups that work keep
 * working). Any thread.
 */
#ifndef OFCD_SECRET_FILE_H
#define OFCD_SECRET_FILE_H

#include <stdbool.h>
#include <stdio.h>
#include <sys/stat.h>

/**
 * Whether users other than its owner and its group may read the file at
 * path, which holds what ("token secrets"): true, with the warning to give in
 * msg (len bytes: the file, its mode and the fix). False also when the file
 * cannot be looked at. Its directories are not looked at.
 */
static inline bool secret_file_exposed(const char *path, const char *what, char *msg, size_t len)
{
	struct stat st;
	if (stat(path, &st) < 0 || !(st.st_mode & S_IROTH))
		return false;
	snprintf(msg, len,
	         "%s holds %s and any user of this machine can read it (mode %04o): chmod o-rwx %s",
	         path, what, (unsigned)(st.st_mode & 07777), path);
	return true;
}

#endif
