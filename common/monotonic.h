/*
 * Elapsed time on the monotonic clock, for timeouts, deadlines and metrics.
 * Any thread.
 */
#ifndef OFCD_MONOTONIC_H
#define OFCD_MONOTONIC_H

#include <time.h>

/** Seconds from a to b (negative when b is earlier), of any one clock. */
static inline double mono_diff(const struct timespec *a, const struct timespec *b)
{
	return (double)(b->tv_sec - a->tv_sec) + (double)(b->tv_nsec - a->tv_nsec) / 1e9;
}

/** Seconds elapsed since t (CLOCK_MONOTONIC; negative when t is still ahead). */
static inline double mono_since(const struct timespec *t)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return mono_diff(t, &now);
}

#endif
