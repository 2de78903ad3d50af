/* comm.c — what every communicator implementation shares: element sizes (see comm.h). */
#include "distributed/comm.h"

/* Size in bytes of one element of type; 0 for a value outside the enumeration. */
int64_t cpparity_element_size(cpparity_element_type type) {
    switch (type) {
    case CPPARITY_FLOAT32:
        return 4;
    case CPPARITY_FLOAT64:
        return 8;
    case CPPARITY_INT64:
        return 8;
    case CPPARITY_INT8:
        return 1;
    case CPPARITY_BFLOAT16:
        return 2;
    }
    return 0;
}
