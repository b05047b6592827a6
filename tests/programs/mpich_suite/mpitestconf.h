/* MPICH's test suite's configuration (its configure's mpitestconf.h), written for the wrapper's build:
 * a Linux C compiler, POSIX threads, and only what MPI defines (USE_STRICT_MPI: no MPIX_ extensions,
 * which the wrapper does not carry). */
#ifndef MPITESTCONF_H_INCLUDED
#define MPITESTCONF_H_INCLUDED
#define HAVE_STDLIB_H 1
#define HAVE_STRING_H 1
#define HAVE_STRINGS_H 1
#define HAVE_STDINT_H 1
#define HAVE_INTTYPES_H 1
#define HAVE_STDARG_H 1
#define HAVE_SYS_TIME_H 1
#define HAVE_SYS_RESOURCE_H 1
#define HAVE_SYS_STAT_H 1
#define HAVE_UNISTD_H 1
#define HAVE_GETRUSAGE 1
#define HAVE_PTHREAD_H 1
#define HAVE_LONG_LONG 1
#define HAVE_STRDUP 1
#define STDC_HEADERS 1
#define THREAD_PACKAGE_NAME THREAD_PACKAGE_POSIX /* its value: mpithreadtest.h's */
#define USE_STRICT_MPI 1
#endif
