/*
 * reference_team_comm.h — a reference_team (reference/team.h) over one of the harness's
 * communicators: the ranks of `comm` share one float64 reference, each computing its row blocks
 * (docs/architecture.md, "Long context: row blocks"). The reference stays free of any
 * communication library: these three functions are its whole transport.
 */
#ifndef CPPARITY_HARNESS_RUNNING_REFERENCE_TEAM_COMM_H
#define CPPARITY_HARNESS_RUNNING_REFERENCE_TEAM_COMM_H

#include "distributed/comm/comm.h"
#include "reference/team.h"

/* The team of comm's ranks (rank and size are comm's). comm must outlive the team; every rank of
 * comm must compute the same reference in the same order, as team.h says. */
reference_team reference_team_of_comm(cpparity_comm *comm);

#endif
