#include "auth_rules.h"

#include <string.h>

bool auth_valid_name(const char *name)
{
	size_t len = strlen(name);
	/* "." and ".." would name path segments that curl and browsers remove. */
	if (len < 1 || len > AUTH_NAME_MAX || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = name[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			return false;
	}
	return true;
}

/* RFC 6750 token68 characters, so any valid secret can be sent in a header. */
bool auth_valid_secret(const char *s)
{
	size_t len = strlen(s);
	if (len < AUTH_SECRET_MIN || len > AUTH_SECRET_MAX)
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      strchr("-._~+/=", c)))
			return false;
	}
	return true;
}
