/*
 * Whether a file that holds a secret (a bearer token, a configuration with
 * tokens) can be read by any user of the machine: ofcd, its agent and ofcctl
 * warn (they do not refuse, as ssh does a private key: setups that work keep
 * working). Any thread.
 */
#ifndef OFCD_SECRET_FILE_H
#define OFCD_SECRET_FILE_H

#include <sys/stat.h>

/**
 * The permission bits of the file at path (e.g. 0644) when users other than
 * its owner and its group may read it, else 0 (also when it cannot be looked
 * at). Its directories are not looked at.
 */
static inline unsigned secret_file_exposed(const char *path)
{
	struct stat st;
	if (stat(path, &st) < 0 || !(st.st_mode & S_IROTH))
		return 0;
	return (unsigned)(st.st_mode & 07777);
}

#endif
