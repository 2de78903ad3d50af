/* device_inline.h — marks functions compiled for both host and CUDA device code. */
#ifndef CPPARITY_DISTRIBUTED_DEVICE_INLINE_H
#define CPPARITY_DISTRIBUTED_DEVICE_INLINE_H

#ifdef __CUDACC__
#define CPPARITY_HOST_DEVICE __host__ __device__
#else
#define CPPARITY_HOST_DEVICE
#endif

#endif
