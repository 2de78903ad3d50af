/* implementation_registry.c — the implementations under test of this build (see
 * implementation_registry.h). */
#include "distributed/models/implementation_registry.h"

#include <string.h>

static const cpparity_implementation *const implementations[] = {
    &cpparity_cpu_implementation,
#ifdef CPPARITY_HAVE_CUDA_IMPLEMENTATION
    &cpparity_cuda_implementation,
#endif
};

#define IMPLEMENTATION_COUNT ((int)(sizeof implementations / sizeof *implementations))

int implementation_registry_count(void) {
    return IMPLEMENTATION_COUNT;
}

const cpparity_implementation *implementation_registry_at(int index) {
    return index >= 0 && index < IMPLEMENTATION_COUNT ? implementations[index] : NULL;
}

const cpparity_implementation *implementation_registry_for_device(const char *device) {
    for (int i = 0; device != NULL && i < IMPLEMENTATION_COUNT; i++) {
        if (strcmp(implementations[i]->device, device) == 0) {
            return implementations[i];
        }
    }
    return NULL;
}
