/* judge_provenance.c — see judge_provenance.h. */
#include "harness/cli/judge_provenance.h"

#include <stdio.h>
#include <unistd.h>

#include "harness/running/run.h"
#include "harness/version.h"

void judge_provenance(run_provenance *p, int argc, char **argv, run_store store,
                      const char *framework, const char *framework_version, const char *kernel,
                      int ranks) {
    snprintf(p->version, sizeof p->version, "%s", CPPARITY_VERSION);
    snprintf(p->git_commit, sizeof p->git_commit, "%s", CPPARITY_GIT_COMMIT);
    gethostname(p->host, sizeof p->host - 1);
    size_t used = (size_t)snprintf(p->command_line, sizeof p->command_line, "cpparity");
    for (int i = 0; i < argc && used < sizeof p->command_line; i++) {
        used +=
            (size_t)snprintf(p->command_line + used, sizeof p->command_line - used, " %s", argv[i]);
    }
    snprintf(p->comm, sizeof p->comm, "judge");
    snprintf(p->device, sizeof p->device, "framework");
    snprintf(p->implementation, sizeof p->implementation, "%.40s%s%.20s", framework,
             framework_version[0] ? " " : "", framework_version);
    snprintf(p->kernel, sizeof p->kernel, "%s", kernel);
    snprintf(p->fault, sizeof p->fault, "none");
    p->ranks = ranks;
    snprintf(p->store, sizeof p->store, "%s", run_store_name(store));
    run_provenance_start(p);
}
