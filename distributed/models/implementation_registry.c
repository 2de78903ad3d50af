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

bool fault_needs_block_calls(cpparity_fault fault) {
    return fault == CPPARITY_FAULT_RING_MERGE_MAX || fault == CPPARITY_FAULT_RING_MERGE_STEP_LSE ||
           fault == CPPARITY_FAULT_RING_LAST_STEP || fault == CPPARITY_FAULT_RING_CAUSAL_SKIP ||
           fault == CPPARITY_FAULT_RING_DKV_DIRECTION ||
           fault == CPPARITY_FAULT_HYBRID_GROUP_ACROSS_RING;
}

implementation_fault_support
implementation_supports_fault(const cpparity_implementation *implementation, cpparity_fault fault) {
    if (fault == CPPARITY_FAULT_HYBRID_GROUP_ACROSS_RING) {
        return implementation->algorithms[CPPARITY_ALGORITHM_HYBRID]
                   ? IMPLEMENTATION_FAULT_SUPPORTED
                   : IMPLEMENTATION_FAULT_NEEDS_HYBRID;
    }
    if (fault_needs_block_calls(fault) && !implementation->algorithms[CPPARITY_ALGORITHM_RING]) {
        return IMPLEMENTATION_FAULT_NEEDS_RING;
    }
    if (fault == CPPARITY_FAULT_ZIGZAG_CHUNK_SWAP &&
        !implementation->layouts[CPPARITY_LAYOUT_ZIGZAG]) {
        return IMPLEMENTATION_FAULT_NEEDS_ZIGZAG;
    }
    return IMPLEMENTATION_FAULT_SUPPORTED;
}
