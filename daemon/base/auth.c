#include "auth.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *const role_names[] = {
	[AUTH_NONE] = "none",
	[AUTH_READ] = "read",
	[AUTH_AGENT] = "agent",
	[AUTH_ADMIN] = "admin",
};

int auth_parse_role(const char *s, enum auth_role *out)
{
	if (strcmp(s, "read") == 0)
		*out = AUTH_READ;
	else if (strcmp(s, "agent") == 0)
		*out = AUTH_AGENT;
	else if (strcmp(s, "admin") == 0)
		*out = AUTH_ADMIN;
	else
		return -EINVAL;
	return 0;
}

const char *auth_role_name(enum auth_role role)
{
	if ((unsigned)role > AUTH_ADMIN)
		return "?";
	return role_names[role];
}

/* Adds a token of any role; server is "" except for AGENT. */
static int tokens_add(struct auth_tokens *t, const char *name, enum auth_role role,
                      const char *server, const char *secret)
{
	if (!auth_valid_name(name) || !auth_valid_secret(secret) || role == AUTH_NONE)
		return -EINVAL;
	for (size_t i = 0; i < t->n; i++)
		if (strcmp(t->v[i].name, name) == 0)
			return -EEXIST;
	struct auth_token *v = realloc(t->v, (t->n + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	t->v = v;
	struct auth_token *tok = &t->v[t->n++];
	memset(tok, 0, sizeof(*tok));
	strcpy(tok->name, name);
	strcpy(tok->secret, secret);
	strcpy(tok->server, server);
	tok->role = role;
	return 0;
}

int auth_tokens_add(struct auth_tokens *t, const char *name, enum auth_role role,
                    const char *secret)
{
	/* An agent token without its server would be a write token for every server. */
	if (role == AUTH_AGENT)
		return -EINVAL;
	return tokens_add(t, name, role, "", secret);
}

int auth_tokens_add_agent(struct auth_tokens *t, const char *name, const char *server,
                          const char *secret)
{
	if (!auth_valid_name(server))
		return -EINVAL;
	return tokens_add(t, name, AUTH_AGENT, server, secret);
}

void auth_tokens_free(struct auth_tokens *t)
{
	if (t->v)
		explicit_bzero(t->v, t->n * sizeof(*t->v));
	free(t->v);
	t->v = NULL;
	t->n = 0;
}

int auth_tokens_copy(struct auth_tokens *dst, const struct auth_tokens *src)
{
	dst->v = NULL;
	dst->n = 0;
	if (src->n == 0)
		return 0;
	dst->v = malloc(src->n * sizeof(*dst->v));
	if (!dst->v)
		return -ENOMEM;
	memcpy(dst->v, src->v, src->n * sizeof(*dst->v));
	dst->n = src->n;
	return 0;
}

/*
 * Compares the candidate against the whole stored secret whatever the
 * candidate's length, so the time depends only on the stored secret's length.
 */
static int ct_equal(const char *stored, const char *cand, size_t cand_len)
{
	size_t stored_len = strlen(stored);
	unsigned diff = (unsigned)(stored_len ^ cand_len);
	for (size_t i = 0; i < stored_len; i++) {
		unsigned char c = cand_len ? (unsigned char)cand[i % cand_len] : 0;
		diff |= (unsigned char)stored[i] ^ c;
	}
	return diff == 0;
}

const struct auth_token *auth_lookup(const struct auth_tokens *t, const char *secret,
                                     size_t secret_len)
{
	const struct auth_token *found = NULL;
	for (size_t i = 0; i < t->n; i++) {
		/* No early exit: every token is compared on every request. */
		if (ct_equal(t->v[i].secret, secret, secret_len) && !found)
			found = &t->v[i];
	}
	return found;
}

const char *auth_bearer(const char *header, size_t *len)
{
	if (!header || strncasecmp(header, "Bearer ", 7) != 0)
		return NULL;
	const char *s = header + 7;
	while (*s == ' ')
		s++;
	size_t n = strlen(s);
	while (n > 0 && s[n - 1] == ' ')
		n--;
	if (n == 0)
		return NULL;
	*len = n;
	return s;
}
