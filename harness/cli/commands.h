/*
 * commands.h — the sub-commands of `cpparity`. Each takes the arguments after its own name
 * (argv[0] is the sub-command), prints to stdout/stderr and returns the process exit code of
 * docs/command-line.md (0 passed, 1 parity failure, 2 bad input, 3 runtime failure).
 */
#ifndef CPPARITY_HARNESS_CLI_COMMANDS_H
#define CPPARITY_HARNESS_CLI_COMMANDS_H

int command_list(int argc, char **argv);
int command_export(int argc, char **argv);
int command_judge(int argc, char **argv);
int command_diff(int argc, char **argv);
int command_report(int argc, char **argv);
int command_run(int argc, char **argv);
int command_selftest(int argc, char **argv);

#endif
