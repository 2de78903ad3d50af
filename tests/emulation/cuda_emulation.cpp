/* cuda_emulation.cpp — the CPU emulation of the CUDA runtime's part cpparity uses (see
 * tests/emulation/cuda_runtime.h). */
#include "cuda_runtime.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

thread_local uint3 threadIdx, blockIdx;
thread_local dim3 blockDim, gridDim;

/* The fill of new memory: 0xFF bytes, a NaN in every float, so that a read of memory nobody
 * wrote shows in the results as it would (as garbage) on a device. */
static const int UNWRITTEN = 0xFF;

static thread_local cudaError_t last_error = cudaSuccess;

static cudaError_t fail(cudaError_t error) {
    last_error = error;
    return error;
}

cudaError_t cudaGetLastError(void) {
    const cudaError_t error = last_error;
    last_error = cudaSuccess;
    return error;
}

const char *cudaGetErrorName(cudaError_t error) {
    switch (error) {
    case cudaSuccess:
        return "cudaSuccess";
    case cudaErrorInvalidValue:
        return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation:
        return "cudaErrorMemoryAllocation";
    case cudaErrorInsufficientDriver:
        return "cudaErrorInsufficientDriver";
    case cudaErrorNoDevice:
        return "cudaErrorNoDevice";
    }
    return "cudaErrorUnknown";
}

const char *cudaGetErrorString(cudaError_t error) {
    switch (error) {
    case cudaSuccess:
        return "no error (emulated)";
    case cudaErrorInvalidValue:
        return "invalid argument (emulated)";
    case cudaErrorMemoryAllocation:
        return "out of memory (emulated)";
    default:
        return "unknown error (emulated)";
    }
}

cudaError_t cudaGetDeviceCount(int *count) {
    *count = 1;
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
    return device == 0 ? cudaSuccess : fail(cudaErrorInvalidValue);
}

cudaError_t cudaGetDevice(int *device) {
    *device = 0;
    return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) {
    return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr attribute, int device) {
    (void)device;
    if (attribute != cudaDevAttrMaxSharedMemoryPerBlockOptin) {
        return fail(cudaErrorInvalidValue);
    }
    *value = 227 * 1024; /* an H100's or H200's opt-in shared memory per block */
    return cudaSuccess;
}

struct CUstream_st {
    int unused;
};

cudaError_t cudaStreamCreate(cudaStream_t *stream) {
    *stream = (cudaStream_t)calloc(1, sizeof(CUstream_st));
    return *stream != NULL ? cudaSuccess : fail(cudaErrorMemoryAllocation);
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned flags) {
    (void)flags;
    return cudaStreamCreate(stream);
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
    free(stream);
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
    (void)stream; /* every stream's work ran when it was enqueued */
    return cudaSuccess;
}

cudaError_t cudaMalloc(void **pointer, size_t bytes) {
    *pointer = malloc(bytes > 0 ? bytes : 1);
    if (*pointer == NULL) {
        return fail(cudaErrorMemoryAllocation);
    }
    memset(*pointer, UNWRITTEN, bytes);
    return cudaSuccess;
}

cudaError_t cudaMallocAsync(void **pointer, size_t bytes, cudaStream_t stream) {
    (void)stream;
    return cudaMalloc(pointer, bytes);
}

cudaError_t cudaMallocHost(void **pointer, size_t bytes) {
    return cudaMalloc(pointer, bytes);
}

cudaError_t cudaFree(void *pointer) {
    free(pointer);
    return cudaSuccess;
}

cudaError_t cudaFreeAsync(void *pointer, cudaStream_t stream) {
    (void)stream;
    free(pointer);
    return cudaSuccess;
}

cudaError_t cudaFreeHost(void *pointer) {
    free(pointer);
    return cudaSuccess;
}

cudaError_t cudaMemcpy(void *to, const void *from, size_t bytes, cudaMemcpyKind kind) {
    (void)kind;
    if (bytes > 0 && (to == NULL || from == NULL)) {
        return fail(cudaErrorInvalidValue);
    }
    memmove(to, from, bytes);
    return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *to, const void *from, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream) {
    (void)stream;
    return cudaMemcpy(to, from, bytes, kind);
}

cudaError_t cudaMemset(void *to, int value, size_t bytes) {
    if (bytes > 0 && to == NULL) {
        return fail(cudaErrorInvalidValue);
    }
    memset(to, value, bytes);
    return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void *to, int value, size_t bytes, cudaStream_t stream) {
    (void)stream;
    return cudaMemset(to, value, bytes);
}

/* --- launches: a block's threads as fibers ---------------------------------------------------
 * A fiber switch saves the callee-saved registers on the running stack and swaps stack pointers.
 * On x86-64 that is the few instructions below (no system call: ucontext's swapcontext saves the
 * signal mask with one, which made a launch cost most of its time in the kernel); elsewhere
 * ucontext. */

enum { MOST_THREADS = 1024, STACK_BYTES = 128 * 1024 };

#if defined(__x86_64__)
/* Saves rbp, rbx, r12–r15, MXCSR and the x87 control word on this stack, *from = its pointer,
 * then continues on the stack `to` (saved the same way, or made by fiber_stack). */
extern "C" void cuda_emulation_switch(void **from, void *to);
__asm__(".text\n"
        ".globl cuda_emulation_switch\n"
        ".type cuda_emulation_switch, @function\n"
        "cuda_emulation_switch:\n"
        "    pushq %rbp\n"
        "    pushq %rbx\n"
        "    pushq %r12\n"
        "    pushq %r13\n"
        "    pushq %r14\n"
        "    pushq %r15\n"
        "    subq $8, %rsp\n"
        "    stmxcsr (%rsp)\n"
        "    fnstcw 4(%rsp)\n"
        "    movq %rsp, (%rdi)\n"
        "    movq %rsi, %rsp\n"
        "    ldmxcsr (%rsp)\n"
        "    fldcw 4(%rsp)\n"
        "    addq $8, %rsp\n"
        "    popq %r15\n"
        "    popq %r14\n"
        "    popq %r13\n"
        "    popq %r12\n"
        "    popq %rbx\n"
        "    popq %rbp\n"
        "    ret\n"
        ".size cuda_emulation_switch, .-cuda_emulation_switch\n");
typedef void *fiber_context; /* the saved stack pointer */
#else
typedef ucontext_t fiber_context;
#endif

/* One host thread's launch state: its fibers, their stacks (made once, kept), the scheduler's
 * context, the running fiber, the launch's body and dynamic shared memory. */
typedef struct fiber_state {
    fiber_context scheduler;
    fiber_context fibers[MOST_THREADS];
    bool done[MOST_THREADS];
    char *stacks;
    unsigned current;
    void (*body)(void *);
    void *context;
    void *dynamic_shared;
} fiber_state;

static thread_local fiber_state *state = NULL;

/* From the running fiber to the scheduler, and back. */
static void to_scheduler(fiber_state *s) {
#if defined(__x86_64__)
    cuda_emulation_switch(&s->fibers[s->current], s->scheduler);
#else
    (void)swapcontext(&s->fibers[s->current], &s->scheduler);
#endif
}

static void to_fiber(fiber_state *s, unsigned t) {
    s->current = t;
#if defined(__x86_64__)
    cuda_emulation_switch(&s->scheduler, s->fibers[t]);
#else
    (void)swapcontext(&s->scheduler, &s->fibers[t]);
#endif
}

void __syncthreads(void) {
    to_scheduler(state); /* the block's other threads reach the barrier before this one goes on */
}

void *cuda_emulation_dynamic_shared(void) {
    return state->dynamic_shared;
}

/* A fiber's start: its thread of the block, then back to the scheduler for good. */
static void fiber_start(void) {
    fiber_state *s = state;
    s->body(s->context);
    s->done[s->current] = true;
#if defined(__x86_64__)
    to_scheduler(s); /* never returns: the scheduler makes the stack anew for the next block */
    abort();
#endif /* ucontext: returning goes to uc_link, the scheduler */
}

/* Makes fiber t's context: its stack, entered at fiber_start. */
static void fiber_make(fiber_state *s, unsigned t) {
    char *stack = s->stacks + (size_t)t * STACK_BYTES;
#if defined(__x86_64__)
    /* the frame cuda_emulation_switch pops: MXCSR and x87 control word, r15–r12, rbx, rbp, then
     * fiber_start as the return address, entered with the stack as after a call (8 mod 16) */
    uint64_t *top = (uint64_t *)(((uintptr_t)(stack + STACK_BYTES)) & ~(uintptr_t)15);
    top[-1] = 0; /* fiber_start's own return address: never used */
    top[-2] = (uint64_t)(uintptr_t)fiber_start;
    for (int r = 3; r <= 8; r++) {
        top[-r] = 0; /* rbp, rbx, r12, r13, r14, r15 */
    }
    const uint32_t control[2] = {0x1F80u, 0x037Fu}; /* the default MXCSR and x87 control word */
    memcpy(&top[-9], control, sizeof control);
    s->fibers[t] = &top[-9];
#else
    ucontext_t *fiber = &s->fibers[t];
    (void)getcontext(fiber);
    fiber->uc_stack.ss_sp = stack;
    fiber->uc_stack.ss_size = STACK_BYTES;
    fiber->uc_link = &s->scheduler;
    makecontext(fiber, fiber_start, 0);
#endif
    s->done[t] = false;
}

void cuda_emulation_run(dim3 grid, dim3 block, size_t shared_bytes, void (*body)(void *),
                        void *context) {
    const unsigned threads = block.x * block.y * block.z;
    if (threads == 0 || threads > MOST_THREADS || grid.x * grid.y * grid.z == 0) {
        (void)fail(cudaErrorInvalidValue);
        return;
    }
    if (state == NULL) {
        state = (fiber_state *)calloc(1, sizeof *state);
        if (state != NULL) {
            state->stacks = (char *)malloc((size_t)MOST_THREADS * STACK_BYTES);
        }
        if (state == NULL || state->stacks == NULL) {
            fprintf(stderr, "cuda emulation: no memory for the fibers' stacks\n");
            abort();
        }
    }
    fiber_state *s = state;
    s->body = body;
    s->context = context;
    s->dynamic_shared = malloc(shared_bytes > 0 ? shared_bytes : 1);
    if (s->dynamic_shared == NULL) {
        (void)fail(cudaErrorMemoryAllocation);
        return;
    }
    gridDim = grid;
    blockDim = block;
    for (unsigned bz = 0; bz < grid.z; bz++) {
        for (unsigned by = 0; by < grid.y; by++) {
            for (unsigned bx = 0; bx < grid.x; bx++) {
                blockIdx = uint3{bx, by, bz};
                memset(s->dynamic_shared, UNWRITTEN, shared_bytes);
                for (unsigned t = 0; t < threads; t++) {
                    fiber_make(s, t);
                }
                /* rounds: each thread runs to its next barrier (or its end) before the next one
                 * starts, so every barrier holds every thread of the block */
                for (bool running = true; running;) {
                    running = false;
                    for (unsigned t = 0; t < threads; t++) {
                        if (s->done[t]) {
                            continue;
                        }
                        threadIdx =
                            uint3{t % block.x, (t / block.x) % block.y, t / (block.x * block.y)};
                        to_fiber(s, t);
                        running = running || !s->done[t];
                    }
                }
            }
        }
    }
    free(s->dynamic_shared);
    s->dynamic_shared = NULL;
}
