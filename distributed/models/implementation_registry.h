/*
 * implementation_registry.h — every implementation under test this cpparity was built with,
 * by device (`--device cpu|cuda`). The table is fixed at build time: adding an implementation is
 * one line in implementation_registry.c.
 */
#ifndef CPPARITY_DISTRIBUTED_IMPLEMENTATION_REGISTRY_H
#define CPPARITY_DISTRIBUTED_IMPLEMENTATION_REGISTRY_H

#include "distributed/models/implementation.h"

/* Number of implementations, and implementation index (NULL outside [0, count)). */
int implementation_registry_count(void);
const cpparity_implementation *implementation_registry_at(int index);

/* The implementation for a device ("cpu", "cuda"), or NULL when none was built. */
const cpparity_implementation *implementation_registry_for_device(const char *device);

#endif
