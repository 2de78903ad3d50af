/*
 * case_defaults.h — gives a case what it does not set itself (cases/README.md, Merging defaults
 * into a case): each key of case_keys from the case, else from the suite's `defaults`, else its
 * schema default; `model` merged key by key; `tolerances` field by field over the built-in
 * values, with the origin of every field; the defaults' rows copied into the case (counted
 * against CASE_MAX_ROW_ENTRIES again). Then it checks what only the merged case shows: required
 * keys, rows adding up to seq_len, cp sizes within seq_len, what an attention-level case may
 * not have, and the merged model (cpparity_model_config_validate).
 */
#ifndef CPPARITY_HARNESS_SUITE_CASE_DEFAULTS_H
#define CPPARITY_HARNESS_SUITE_CASE_DEFAULTS_H

#include "common/case.h"
#include "harness/suite/case_reader.h"

/* Merges settings (a case as written) over defaults into result and checks it; scope names the
 * case in messages, case_node and name_node locate errors no single value explains. Moves the
 * case's rows into result. result's name and line are the caller's. */
cpparity_status case_defaults_apply(case_reader *reader, const char *scope,
                                    const yaml_node_t *case_node, const yaml_node_t *name_node,
                                    const case_settings *defaults, case_settings *settings,
                                    cpparity_case *result);

#endif
