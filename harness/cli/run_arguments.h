/*
 * run_arguments.h — the command line of `cpparity run` (docs/command-line.md): parsing argv into
 * run_options and the --help text. Flags that name outputs, choices of dtype, store, device,
 * communicator and kernel all come from their tables (run_outputs.h, common/case.h,
 * results_model/results.h, the registries), so the parser and the help text never disagree with
 * them.
 * Every bad flag is an input error (exit 2) naming the flag.
 */
#ifndef CPPARITY_HARNESS_CLI_RUN_ARGUMENTS_H
#define CPPARITY_HARNESS_CLI_RUN_ARGUMENTS_H

#include <stdio.h>

#include "common/error.h"
#include "harness/running/run_options.h"

/* The sub-command parsed: `run`, or `selftest` (no --inject, --junit or --markdown; adds
 * --seeds and --fault). */
typedef enum run_command_kind { RUN_COMMAND_RUN = 0, RUN_COMMAND_SELFTEST = 1 } run_command_kind;

/* Parses argv (argv[0] = the sub-command). CPPARITY_ERROR_INPUT with the flag named on a bad
 * option. */
cpparity_status run_arguments_parse(run_options *options, int argc, char **argv,
                                    run_command_kind kind, cpparity_error *error);

/* A flag's whole decimal number in [minimum, maximum], or an input error naming the flag. */
/* --reference-cache DIR (run, selftest, judge): a folder, made when missing (one level), that
 * takes new files; CPPARITY_ERROR_INPUT naming the flag otherwise. */
cpparity_status run_arguments_reference_cache(const char *folder, cpparity_error *error);

cpparity_status run_arguments_integer(const char *text, const char *flag, long long minimum,
                                      long long maximum, long long *value, cpparity_error *error);

/* The index of text in a name table, or an input error naming the flag and the choices. */
cpparity_status run_arguments_choice(const char *text, const char *flag, const char *const *names,
                                     int count, int *value, cpparity_error *error);

/* Prints the --help text of kind, with the registered kernels, devices and communicators. */
void run_arguments_usage(FILE *stream, run_command_kind kind);

#endif
